;; What this repository's agents remember and which webhooks wake them.
;; `cortex dsl check org/definitions.hy` reads this file as data; evaluated in the
;; REPL (or by `hy`), each form registers its definition in the session instead.
(require cortex.dsl.macros [defmemory defwebhook])

;; The assistant's memory: Org files under org/agents/<agent-id>/, daily logs kept
;; for three months, recall ranked by meaning and by words alike.
(defmemory agent-memory
  :store org
  :path "org/agents"
  :retention "90d"
  :search {:vector-weight 0.5 :keyword-weight 0.5})

;; Newly opened pull requests go to the assistant for a first review.
(defwebhook github-events
  :path "/hooks/github"
  :provider github
  :secret "secret://env/GITHUB_WEBHOOK_SECRET"
  :agent assistant
  :filter {:json-path "$.action" :equals "opened"})

;; Payment events only; Stripe also sends customer and invoice events here.
(defwebhook stripe-payments
  :path "/hooks/stripe"
  :provider stripe
  :secret "secret://env/STRIPE_WEBHOOK_SECRET"
  :agent assistant
  :filter {:json-path "$.type" :contains "payment_intent."})
