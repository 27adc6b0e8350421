"""A hostile client of an agent-bound MCP server: secrets are planted in every place a server bound to agent
`assistant` (and given tenant `acme`) must not reach (another agent's memory and daily log, a note, a link to
another agent's file in the assistant's folder, a file only a snapshot holds, a snapshot's message, another
tenant's conversation), and every tool and resource is probed with what would reach them: ids, oids, paths,
queries, snapshots. No answer, result or error, holds a secret; an id out of scope is answered as one that does
not exist. Over stdio (writes allowed) and HTTP (read-only), and a server over every agent given one tenant."""

import os
import re

import pytest

import cortex.api as cx
from tests.mcp_client import Refused, http_server, prepared, stdio_server

SECRETS = {
    "reviewer memory": "CARD-4111-1111-REVIEWER",
    "reviewer log": "PASSPHRASE-REVIEWER-LOG",
    "note": "NOTE-SECRET-OUTSIDE-AGENTS",
    "past note": "ONLY-IN-A-SNAPSHOT",
    "message": "MESSAGE-SECRET-OF-A-SNAPSHOT",
    "tenant": "TURN-SECRET-OF-ANOTHER-TENANT",
}
REVIEWER_ID, NOTE_ID, PAST_ID = "rev-secret-item", "note-secret", "past-secret"


def _headline(title: str, org_id: str, body: str) -> str:
    return f"** {title}\n:PROPERTIES:\n:ID:       {org_id}\n:END:\n{body}\n"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A store with the secrets in place, each where the bound server must not reach; its Org folder and the
    oids of the planted headlines."""
    folder = tmp_path_factory.mktemp("planted")
    store, org = prepared(folder)
    reviewer = org / "agents" / "reviewer"
    with (reviewer / "memory.org").open("a") as memory:
        memory.write(_headline(f"The card is {SECRETS['reviewer memory']}", REVIEWER_ID,
                               "[[id:mem-assistant-dark-mode]]"))
    (reviewer / "logs").mkdir()
    (reviewer / "logs" / "2026-11-21.org").write_text(f"* 10:00 — Keys\n{SECRETS['reviewer log']}\n")
    (org / "notes" / "secret.org").write_text(
        f"* The note {SECRETS['note']} :secret:\n:PROPERTIES:\n:ID:       {NOTE_ID}\n:END:\n"
        "Links to [[id:mem-assistant-dark-mode][the assistant's item]].\n")
    os.symlink(reviewer / "memory.org", org / "agents" / "assistant" / "linked.org")
    (org / "notes" / "past.org").write_text(f"* {SECRETS['past note']}\n:PROPERTIES:\n:ID:       {PAST_ID}\n:END:\n")
    with cx.open(store, org) as c:
        c.ingest()
        past = c.snapshot("with the past note")
        (org / "notes" / "past.org").unlink()
        assistant = org / "agents" / "assistant" / "memory.org"
        assistant.write_text(assistant.read_text().replace("dark mode", "dark mode everywhere"))
        (reviewer / "memory.org").write_text((reviewer / "memory.org").read_text() + "* Later\n")
        c.ingest()
        c.snapshot(f"both agents, {SECRETS['message']}")
        assistant.write_text(assistant.read_text().replace("everywhere", "everywhere, always"))
        c.ingest()
        c.snapshot("the assistant alone")
        with c.conversations() as memory:
            memory.add_turn(cx.Identity("other", "eve", "s-1"), cx.Turn(SECRETS["tenant"], "noted"))
            memory.add_turn(cx.Identity("acme", "ada", "s-1"), cx.Turn("What is due?", "The report."))
        oids = {n.id: n.oid.hex() for n in c.headlines(past.oid.hex()) if n.id in (REVIEWER_ID, NOTE_ID, PAST_ID)}
    return store, org, past.oid.hex()[:12], oids


@pytest.fixture(scope="module", params=["stdio", "http read-only"])
def bound(request, planted):
    store, org, past, oids = planted
    options = ("--store", str(store), "--org", str(org), "--agent", "assistant", "--tenant", "acme")
    log = store.parent / f"{request.param.split()[0]}.log"
    if request.param == "stdio":
        server = stdio_server(log, *options, "--allow-rollback")
    else:
        server = http_server(log, *options, "--read-only")
    with server as client:
        client.past, client.oids = past, oids
        yield client
    assert "Traceback" not in log.read_text()


def answers(client, probes) -> list[str]:
    """Every probe's answer as text: a tool's result or error, a resource's text or error."""
    found = []
    for tool, arguments in probes:
        if tool == "read":
            try:
                found.append(client.read(arguments))
            except Exception as exc:  # noqa: BLE001 - the error's text is the answer
                found.append(str(exc))
        else:
            found.append(str(client.call(tool, **arguments)))
    return found


def probes(client) -> list[tuple[str, object]]:
    """What a hostile client asks, to reach each planted secret by every tool and resource."""
    past, oids = client.past, client.oids
    ids = [REVIEWER_ID, NOTE_ID, PAST_ID, *oids.values(), "agents/reviewer/memory.org", "notes/secret.org",
           "agents/assistant/linked.org", "agents/reviewer/logs/2026-11-21.org", "notes/past.org"]
    refs = [None, "HEAD", "HEAD~1", "HEAD~2", past]
    words = [*SECRETS.values(), "card", "passphrase", "secret note", "keys"]
    found = [("search", {"query": w, "as_of": r}) for w in words for r in refs]
    found += [("search", {"query": "card", "agent": "reviewer"}), ("search", {"query": "card", "type": "fact"})]
    found += [("show", {"target": i, "as_of": r}) for i in ids for r in refs]
    found += [("find", {"text": t}) for t in ("card", "note", "SECRET", "ONLY")] + [("find", {"tag": "secret"}),
                                                                                    ("find", {"prop": "ID"})]
    found += [("query", {"query": q, "as_of": r}) for r in refs for q in (
        '(regexp "SECRET")', '(regexp "CARD")', "+secret", '(linked-from (regexp "SECRET"))',
        '(linked-from (tags "secret"))', f'(links-to "{NOTE_ID}")', '(heading "card")', '(path "notes")')]
    found += [("diff", {"from_ref": a, "to_ref": b}) for a in (None, "HEAD~2", past) for b in (None, "HEAD", past)]
    found += [("log", {"limit": 50}), ("recent_activity", {"since": "2000-01-01"}),
              ("recent_activity", {"since": past})]
    found += [("memory_inspect", {}), ("memory_inspect", {"agent": "reviewer"})]
    found += [("memory_add", {"agent": "reviewer", "text": "x"}), ("memory_forget", {"item": REVIEWER_ID}),
              ("memory_forget", {"agent": "reviewer", "item": REVIEWER_ID}),
              ("memory_compact", {"agent": "reviewer", "max_age": "100y"}),
              ("memory_retire", {"item": REVIEWER_ID}), ("memory_retire", {"agent": "reviewer", "item": REVIEWER_ID}),
              ("memory_add", {"text": "y", "supersedes": REVIEWER_ID}),
              ("memory_add", {"agent": "reviewer", "text": "y", "supersedes": REVIEWER_ID})]
    found += [("get_context", {"tenant": t, "user": u, "session": "s-1", "strategy": s})
              for t, u in (("other", "eve"), ("acme", "ada"), ("acme", "eve"))
              for s in ("truncation", "rolling_summary")]
    found += [("memory_turns", {"session": "s-1", "turns": [{"speaker": "eve", "text": "x"}], "agent": "reviewer"}),
              ("search", {"query": "card", "speaker": "eve", "context": 3}),
              ("search", {"query": "card", "since": "2000-01-01", "until": "2100-01-01"})]
    found += [("add_turn", {"tenant": "other", "user": "eve", "session": "s-1", "user_message": "x",
                            "assistant_response": "y"}), ("snapshot", {"message": "probe"}),
              ("rollback", {"ref": past})]
    for path in ids[5:]:
        found += [("read", f"cortex://files/{path}"), ("read", f"cortex://snapshots/{past}/files/{path}")]
    found += [("read", f"cortex://ids/{i}") for i in ids[:5]] + [("read", f"cortex://snapshots/{past}/ids/{i}")
                                                                 for i in ids[:5]]
    found += [("read", "cortex://agents/reviewer/memory"), ("read", "cortex://agents/reviewer/logs/2026-11-21"),
              ("read", "cortex://files/notes/..%2Fagents/reviewer/memory.org"),
              ("read", "cortex://files/agents/assistant/../reviewer/memory.org")]
    return found


def test_no_answer_of_a_bound_server_holds_a_secret(bound):
    asked = probes(bound)
    listed = {t.name for t in bound.portal.call(bound.session.list_tools).tools}
    assert listed <= {tool for tool, _ in asked}, "a tool no probe asks"
    templates = {t.uri_template.split("{")[0] for t in
                 bound.portal.call(bound.session.list_resource_templates).resource_templates}
    assert all(any(str(a).startswith(t) for tool, a in asked if tool == "read") for t in templates)
    for (tool, arguments), answer in zip(asked, answers(bound, asked)):
        leaked = [name for name, secret in SECRETS.items() if secret.lower() in answer.lower()]
        assert not leaked, (tool, arguments, leaked, answer[:300])
    resources = " ".join(bound.resources())
    assert "reviewer" not in resources and "notes/" not in resources and "linked.org" not in resources


def test_what_is_in_scope_is_reached(bound):
    assert "dark mode everywhere" in bound.call("show", target="mem-assistant-dark-mode")
    assert bound.call("search", query="dark mode")["results"][0]["id"] == "mem-assistant-dark-mode"
    assert bound.call("get_context", tenant="acme", user="ada", session="s-1")["turns"]
    messages = [s["message"] for s in bound.call("log", limit=50)["snapshots"]]
    assert "the assistant alone" in messages and None in messages  # the one that changed the reviewer's too


@pytest.mark.parametrize("tool, argument", [("show", "target"), ("read", "cortex://ids/"),
                                            ("read", "cortex://snapshots/HEAD/ids/")])
def test_an_id_out_of_scope_is_answered_as_one_that_does_not_exist(bound, tool, argument):
    for outside in (REVIEWER_ID, NOTE_ID, bound.oids[REVIEWER_ID]):
        absent = "0" * 64 if re.fullmatch("[0-9a-f]{64}", outside) else "no-such-id-at-all"
        theirs, none = (answers(bound, [(tool, {argument: name} if tool != "read" else argument + name)])[0]
                        for name in (outside, absent))
        assert theirs.replace(outside, "X") == none.replace(absent, "X")


def test_a_server_over_every_agent_given_a_tenant_reaches_that_tenant_only(planted):
    store, org, _, _ = planted
    with stdio_server(store.parent / "unbound.log", "--store", str(store), "--org", str(org), "--read-only",
                      "--tenant", "acme") as client:
        other = client.call("get_context", tenant="other", user="eve", session="s-1")
        assert isinstance(other, Refused) and "reaches the conversations of tenant 'acme' only" in other
        assert SECRETS["tenant"] not in other
        assert client.call("get_context", tenant="acme", user="ada", session="s-1")["turns"]
        assert SECRETS["note"] in client.call("show", target=NOTE_ID)  # every agent's and note's: unbound
