"""The REPL's forms for definitions and webhooks: load a definitions file, define memories and webhooks
live, list the webhooks in force, test one with a signed delivery, read the delivery log.
"""

from __future__ import annotations

import hy

from .registry import form, macro

# --- definitions ------------------------------------------------------------------------------


@form
def load_dsl(session, path):
    """Load a definitions file (Hy, or Org with `:cortex yes` blocks) into the session: (load-dsl "definitions.hy").

    Paths are relative to the Org folder. A name defined again replaces its earlier definition. Every
    problem is shown as file:line:column with the line and a caret, and then nothing is loaded.
    """
    return session.cortex.load_dsl(session.org_path(path))


@macro("cortex.dsl.macros")
def defmemory(session, name, *settings):
    """Define an agent memory in this session: (defmemory agent-memory :retention "30d").

    Settings: :store org or ephemeral, :path "org/agents", :retention "90d",
    :search {:vector-weight 0.5 :keyword-weight 0.5 :fusion rrf} (search ranks by the first memory's).
    Defining a name again replaces it; a problem is shown where it was written and nothing is defined.
    """


@macro("cortex.dsl.macros")
def defwebhook(session, name, *settings):
    """Define a webhook in this session; (webhook-test NAME PAYLOAD) then delivers to it.

    (defwebhook github-events :path "/hooks/github" :provider github
      :secret "secret://env/GITHUB_WEBHOOK_SECRET" :agent assistant
      :filter {:json-path "$.action" :equals "opened"})
    Providers: github stripe slack standard custom (:header :prefix :encoding :algorithm) jwt
    (:algorithms :issuer :audience :public-key). Defining a name again replaces it; a problem is shown
    where it was written and nothing is defined.
    """


# --- webhooks ---------------------------------------------------------------------------------


@form
def webhooks(session):
    """The webhooks in force: the definitions file's, Org definition blocks', then this session's; secrets hidden."""
    return list(session.cortex.webhooks())


@form
def webhook_test(session, name, payload, *, event=None, tamper=False, stale=False, url=None):
    """Sign a payload with a webhook's real scheme and secret, deliver it, and show what became of it.

    (webhook-test "github-events" {"action" "opened"} :event "pull_request")
    PAYLOAD is a Hy dict or list (keywords become strings) or JSON text. :tamper True changes the body
    after signing and :stale True signs it an hour ago: both must be rejected. :url "http://127.0.0.1:8787"
    delivers to a running `cortex serve` instead of in-process. Shows verification, the filter's decision,
    the agent it was routed to, the status and the latency.
    """
    return session.cortex.webhook_test(name, json_ready(payload), event=event, url=url, tamper=tamper, stale=stale)


@form
def webhook_logs(session, *, name=None, tail=20):
    """The delivery log, oldest first: answer, verification, filter and routing of each delivery.

    (webhook-logs :name "github-events" :tail 5); :tail None shows every delivery.
    """
    return session.cortex.webhook_logs(name, tail)


def json_ready(value):
    """A Hy value as JSON holds it: keywords become their names; JSON text and bytes stay as they are."""
    if isinstance(value, hy.models.Keyword):
        return value.name
    if isinstance(value, dict):
        return {json_ready(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value
