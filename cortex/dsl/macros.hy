"defmemory and defwebhook as Hy macros: evaluating one registers its definition in the session.

  (require cortex.dsl.macros [defmemory defwebhook])
  (defwebhook github-events :path \"/hooks/github\" :provider github :secret \"secret://env/GH\")

The form is checked when it is expanded, by the same interpreter that loads definitions files, so
its problems carry the positions where it was written; they are raised when the form runs."

(defn expand [compiler]
  "The code a definition form expands to: register it, or raise the problems found in it."
  (setv form compiler.this
        #(#(line column) problems) (hy.I.cortex/dsl/registry.check-form
                                     form compiler.filename compiler.source))
  (if problems
    `(hy.I.cortex/dsl/registry.reject ~problems)
    `(hy.I.cortex/dsl/registry.define '~form ~compiler.filename ~line ~column)))

(defmacro defmemory [_hy_compiler #* _]
  "Define an agent memory: (defmemory NAME :store org :path \"org/agents\" :retention \"90d\" ...)."
  (expand _hy_compiler))

(defmacro defwebhook [_hy_compiler #* _]
  "Define a webhook endpoint: (defwebhook NAME :path \"/hooks/x\" :provider github :secret \"...\" ...)."
  (expand _hy_compiler))
