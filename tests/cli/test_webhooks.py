"""`cortex webhook` and `cortex serve` through click's runner, on a real store and a copy of the Org files."""

import re
import socket
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import cortex.api as cx
from cortex.cli.webhooks import serve_command, webhook_group
from cortex.dsl import Provider, WebhookDefinition
from cortex.errors import NotFound, UserError
from cortex.webhooks import MissingSecret
from cortex.webhooks.receiver import serving

REPO = Path(__file__).resolve().parents[2]

SECRET = "gh-s3cr3t-6f1d0c"
LITERAL = "literal-s3cr3t-a9e2"
ENV = {"GITHUB_WEBHOOK_SECRET": SECRET, "STRIPE_WEBHOOK_SECRET": "whsec_stripe_s3cr3t"}


@pytest.fixture
def run(tmp_path, org):
    """Invoke `cortex webhook ...`; every output is checked to hold no secret."""
    runner = CliRunner(env=ENV)

    def invoke(*args, ok=True):
        result = runner.invoke(webhook_group, [args[0], "--store", str(tmp_path / "store"), "--org", str(org),
                                               *args[1:]])
        if ok:
            assert result.exit_code == 0, result.output + repr(result.exception)
        assert SECRET not in result.output and LITERAL not in result.output
        return result

    return invoke


def delivery_id(output: str) -> str:
    return re.search(r"delivery\s+([0-9a-f]{24})", output)[1]


def test_add_appends_the_form_and_keeps_the_rest_of_the_file(run, org):
    definitions = org / "definitions.hy"
    before = definitions.read_text()
    result = run("add", "ci", "--path", "/hooks/ci", "--provider", "standard", "--secret", "secret://env/CI_SECRET",
                 "--agent", "reviewer", "--json-path", "$.attempt", "--equals", "3")
    assert "added webhook ci: POST /hooks/ci (standard, to agent reviewer)" in result.output
    after = definitions.read_text()
    assert after.startswith(before) and after[len(before):] == (
        '\n(defwebhook ci\n  :path "/hooks/ci"\n  :provider standard\n  :secret "secret://env/CI_SECRET"\n'
        '  :agent reviewer\n  :filter {:json-path "$.attempt" :equals 3})\n')
    listed = run("list").output
    assert re.search(r"ci\s+│ /hooks/ci\s+│ standard\s+│ reviewer\s+│ \$\.attempt == 3", listed)


def test_remove_restores_the_file_byte_for_byte(run, org):
    definitions = org / "definitions.hy"
    before = definitions.read_text()
    run("add", "shop", "--path", "/hooks/shop", "--provider", "custom", "--secret", "secret://env/SHOP",
        "--header", "X-Shop-Hmac", "--encoding", "base64", "--json-path", "$.tags", "--contains", "vip")
    assert ':header "X-Shop-Hmac"\n  :encoding base64\n' in definitions.read_text()
    assert "removed webhook shop" in run("remove", "shop").output
    assert definitions.read_text() == before


def test_a_literal_secret_is_written_as_asked_but_never_shown(run, org):
    result = run("add", "hook", "--path", "/hooks/x", "--provider", "github", "--secret", LITERAL)
    assert "written literally" in result.output
    assert LITERAL in (org / "definitions.hy").read_text()
    assert "inline" in run("list").output


def test_add_refuses_what_would_not_be_a_valid_definition(run, org):
    before = (org / "definitions.hy").read_text()
    taken = run("add", "github-events", "--path", "/x", "--provider", "github", "--secret", "s", ok=False)
    assert isinstance(taken.exception, UserError) and "already defined" in str(taken.exception)
    clash = run("add", "other", "--path", "/hooks/github", "--provider", "github", "--secret", "s", ok=False)
    assert "already served by webhook github-events" in str(clash.exception)
    unfiltered = run("add", "x", "--path", "/x", "--provider", "github", "--equals", "1", ok=False)
    assert unfiltered.exit_code == 2 and "give --json-path" in unfiltered.output
    headerless = run("add", "x", "--path", "/x", "--provider", "custom", "--secret", "s", ok=False)
    assert headerless.exit_code == 2 and "--provider custom needs --header" in headerless.output
    secretless = run("add", "x", "--path", "/x", "--provider", "stripe", ok=False)
    assert secretless.exit_code == 2 and "--provider stripe needs --secret" in secretless.output
    confused = run("add", "x", "--path", "/x", "--provider", "jwt", "--secret", "s", "--algorithm", "RS256", ok=False)
    assert confused.exit_code == 2 and "--algorithm RS256 verifies with --public-key, but --secret" in confused.output
    unknown = run("add", "x", "--path", "/x", "--provider", "jwt", "--secret", "s", "--algorithm", "none", ok=False)
    assert unknown.exit_code == 2 and "Invalid value for '--algorithm': 'none' is not one of" in unknown.output
    assert (org / "definitions.hy").read_text() == before


INJECTED = 'assistant) (defwebhook evil :path "/evil" :provider github :secret "s"'


@pytest.mark.parametrize("args, option", [
    (["x", "--agent", INJECTED], "'--agent'"),
    ([INJECTED.replace("assistant", "x"), "--agent", "assistant"], "'NAME'"),
    (["x", "--agent", "reviewer\n(defwebhook evil)"], "'--agent'"),
    (["x", "--path", '/x" :agent evil'], "'--path'"),
    (["x", "--path", "hooks/x"], "'--path'"),
    (["x", "--path", "/hooks/{anything}"], "'--path'"),
    (["x", "--secret", " "], "'--secret'"),
    (["x", "--json-path", '$[?match(@.a, "a{1001}")]', "--equals", "1"], "'--json-path'"),
    (["x", "--json-path", "$.a[", "--equals", "1"], "'--json-path'"),
])
def test_add_refuses_a_value_that_is_not_what_its_option_takes_naming_the_option(run, org, args, option):
    before = (org / "definitions.hy").read_text()
    defaults = {"--path": "/x", "--secret": "secret://env/X"}
    given = args + [word for name, value in defaults.items() if name not in args for word in (name, value)]
    result = run("add", *given, "--provider", "github", ok=False)
    assert result.exit_code == 2 and f"Invalid value for {option}" in result.output
    assert "Traceback" not in result.output and (org / "definitions.hy").read_text() == before


def test_add_writes_text_values_quoted_so_they_cannot_start_a_form(run, org):
    secret = 'x") (defwebhook evil :path "/evil" :provider github :secret "s'
    run("add", "hook", "--path", "/hooks/hook", "--provider", "custom", "--secret", secret,
        "--header", "X-Sig", "--prefix", 'p") (defwebhook evil2', "--json-path", "$.a", "--equals", 'v"\n)')
    hooks = {w.name: w for w in cx.load_definitions(org / "definitions.hy").webhooks}
    assert sorted(hooks) == ["github-events", "hook", "stripe-payments"]
    assert hooks["hook"].secret == secret and hooks["hook"].signature.prefix == 'p") (defwebhook evil2'
    assert hooks["hook"].filter.equals == 'v"\n)'


def test_the_definition_writer_refuses_a_name_it_would_write_bare(cortex, org):
    before = (org / "definitions.hy").read_text()
    hook = cx.WebhookDefinition(name="ci", path="/hooks/ci", provider=cx.Provider.GITHUB, secret="s", agent=INJECTED)
    with pytest.raises(UserError, match="agent .* must be a letter, then letters, digits, - or _"):
        cortex.add_webhook(hook)
    with pytest.raises(UserError, match="webhook 'ci' cannot be written as given: :path must be a URL path"):
        cortex.add_webhook(cx.WebhookDefinition(name="ci", path="ci", provider=cx.Provider.GITHUB, secret="s"))
    assert (org / "definitions.hy").read_text() == before


def test_test_shows_verification_filter_agent_status_and_latency(run):
    result = run("test", "github-events", "--payload", '{"action": "opened"}', "--event", "pull_request")
    lines = dict(line.split(None, 1) for line in result.output.splitlines())
    assert lines["webhook"] == "github-events (in-process)" and lines["verified"] == "yes"
    assert lines["filter"] == 'matched: $.action found "opened", equal to "opened"'
    assert lines["agent"] == "assistant" and lines["status"] == "200 routed"
    assert re.fullmatch(r"[0-9a-f]{24}", lines["delivery"]) and lines["latency"].endswith(" ms")


def test_tampered_and_stale_deliveries_are_shown_rejected(run):
    tampered = run("test", "github-events", "--payload", '{"action": "opened"}', "--tamper").output
    assert "verified  no: signature_mismatch" in tampered and "status    401 rejected" in tampered
    stale = run("test", "stripe-payments", "--payload", '{"type": "payment_intent.created"}', "--stale").output
    assert "verified  no: timestamp_too_old" in stale


def test_test_exits_1_when_the_delivery_is_not_accepted(run, tmp_path, org):
    other = WebhookDefinition("github-events", "/hooks/github", Provider.GITHUB, "not-the-secret-the-cli-signs-with")
    with cx.open(tmp_path / "receiver-store", org) as receiver, serving(receiver.webhook_service([other])) as url:
        result = run("test", "github-events", "--payload", '{"action": "opened"}', "--url", url, ok=False)
    assert result.exit_code == 1 and "verified  no: signature_mismatch" in result.output
    assert "the delivery was not accepted" in result.output


def test_test_signs_a_public_key_jwt_with_the_private_key_given(run, tmp_path, org):
    key = ec.generate_private_key(ec.SECP256R1())
    (org / "sso.pem").write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    private = tmp_path / "sso-private.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    run("add", "sso", "--path", "/hooks/sso", "--provider", "jwt", "--public-key", "secret://file/sso.pem",
        "--algorithm", "ES256")
    unsigned = run("test", "sso", "--payload", "{}", ok=False)
    assert "--private-key" in str(unsigned.exception)
    result = run("test", "sso", "--payload", "{}", "--private-key", str(private))
    assert "verified  yes" in result.output and "status    200 accepted" in result.output
    stranger = tmp_path / "other.pem"
    stranger.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    mismatched = run("test", "sso", "--payload", "{}", "--private-key", str(stranger), ok=False)
    assert "does not sign ES256 tokens that the webhook's public key verifies" in str(mismatched.exception)


def test_a_jwt_webhook_can_bind_its_tokens_to_the_body_and_cap_their_lifetime(run, org):
    run("add", "ci", "--path", "/hooks/ci", "--provider", "jwt", "--secret", "secret://env/CI_JWT",
        "--body-hash-claim", "body_sha256", "--max-lifetime", "5m")
    assert ':body-hash-claim "body_sha256"\n  :max-lifetime "5min")' in (org / "definitions.hy").read_text()
    [ci] = [w for w in cx.load_definitions(org / "definitions.hy").webhooks if w.name == "ci"]
    assert (ci.jwt.body_hash_claim, ci.jwt.max_lifetime) == ("body_sha256", timedelta(minutes=5))
    result = CliRunner(env={**ENV, "CI_JWT": "a-jwt-hmac-secret-of-at-least-32-bytes!"}).invoke(
        webhook_group, ["test", "--store", str(org.parent / "store"), "--org", str(org), "ci", "--payload", "{}"])
    assert result.exit_code == 0 and "verified  yes" in result.output


def test_a_payload_can_come_from_a_file(run, tmp_path):
    (tmp_path / "event.json").write_text('{"action": "closed"}')
    result = run("test", "github-events", "--payload", f"@{tmp_path / 'event.json'}")
    assert "status    200 filtered" in result.output
    missing = run("test", "github-events", "--payload", "@/nonexistent.json", ok=False)
    assert "No such file" in str(missing.exception)


def test_logs_and_redeliver(run, org):
    routed = delivery_id(run("test", "github-events", "--payload", '{"action": "opened", "n": 1}').output)
    run("test", "stripe-payments", "--payload", '{"type": "payment_intent.created"}', "--tamper")
    logs = run("logs").output
    assert routed in logs and "signature_mismatch" in logs and "200 routed" in logs
    assert "stripe-payments" not in run("logs", "--name", "github-events").output
    assert routed not in run("logs", "--tail", "1").output
    again = run("redeliver", routed).output
    new = re.search(r"redelivered \w+ as ([0-9a-f]{24}): 200 routed to agent assistant", again)[1]
    log_text = "".join(p.read_text() for p in (org / "agents/assistant/logs").glob("*.org"))
    assert f"- Delivery :: {new}\n- Trigger :: redeliver" in log_text
    assert "redeliver" in run("logs", "--tail", "1").output


def test_prune_removes_old_deliveries_and_refuses_a_bad_age(run):
    run("test", "github-events", "--payload", '{"action": "opened"}')
    assert "removed 0 deliveries older than 1d" in run("prune", "1d").output
    assert "github-events" in run("logs").output
    failed = run("prune", "soon", ok=False)
    assert failed.exit_code == 2 and "Invalid value for AGE" in failed.output


def test_logs_of_an_empty_store_say_so(run, tmp_path, org):
    missing = run("logs", "--name", "x", ok=False)  # and a missing one: reading it made none
    assert missing.exit_code == 1 and "no store here; make one by ingesting" in str(missing.exception)
    cx.open(tmp_path / "store", org).close()
    assert "no deliveries for webhook x" in run("logs", "--name", "x").output


def test_serve_names_the_webhook_whose_secret_is_missing(tmp_path, org):
    result = CliRunner(env={"GITHUB_WEBHOOK_SECRET": SECRET, "STRIPE_WEBHOOK_SECRET": None}).invoke(
        serve_command, ["--store", str(tmp_path / "store"), "--org", str(org), "--port", "0"])
    assert isinstance(result.exception, MissingSecret)
    assert "'stripe-payments'" in str(result.exception) and SECRET not in str(result.exception)
    neither = CliRunner(env={"GITHUB_WEBHOOK_SECRET": None, "STRIPE_WEBHOOK_SECRET": None}).invoke(
        serve_command, ["--store", str(tmp_path / "store"), "--org", str(org), "--port", "0"])
    named = str(neither.exception)  # every missing secret at once, not one per attempt
    assert named.startswith("2 webhooks have no secret") and "'GITHUB_WEBHOOK_SECRET'" in named
    assert "'STRIPE_WEBHOOK_SECRET'" in named


def test_make_run_gives_the_bundled_webhooks_example_secrets(tmp_path):
    shown = subprocess.run(["make", "-s", "-n", "run", "STAMP="], cwd=REPO, capture_output=True, text=True).stdout
    assert all(f"{name}=${{{name}:-" in shown for name in ("GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET",
                                                           "DEPLOY_WEBHOOK_SECRET"))


# --- the api the commands call ------------------------------------------------------------------


def test_add_webhook_then_remove_webhook_leaves_the_definitions_file_as_it_was(cortex, org):
    definitions = org / "definitions.hy"
    before = definitions.read_text()
    hook = cx.WebhookDefinition(name="ci", path="/hooks/ci", provider=cx.Provider.STANDARD,
                                secret="secret://env/CI_SECRET", agent="reviewer",
                                filter=cx.WebhookFilter("$.attempt", equals=3))
    assert cortex.add_webhook(hook) == definitions
    assert definitions.read_text() == before + (
        '\n(defwebhook ci\n  :path "/hooks/ci"\n  :provider standard\n  :secret "secret://env/CI_SECRET"\n'
        '  :agent reviewer\n  :filter {:json-path "$.attempt" :equals 3})\n')
    assert [w.name for w in cortex.webhooks()] == ["github-events", "stripe-payments", "ci"]
    assert cortex.remove_webhook("ci") == definitions
    assert definitions.read_text() == before
    assert [w.name for w in cortex.webhooks()] == ["github-events", "stripe-payments"]


@pytest.mark.parametrize("change", ["add", "remove"])
def test_an_edit_saved_to_the_definitions_file_meanwhile_is_kept(cortex, org, monkeypatch, change):
    import cortex.dsl as dsl

    definitions = org / "definitions.hy"
    hook = cx.WebhookDefinition(name="ci", path="/hooks/ci", provider=cx.Provider.STANDARD, secret="s")
    if change == "remove":
        cortex.add_webhook(hook)
    name = f"{change}_definition"
    real = getattr(dsl, name)
    saved = []

    def saving_first(source, *args):  # a person saves the file (temporary file, rename) as cortex edits it
        if not saved:
            temp = org / ".#definitions.hy"
            temp.write_text(definitions.read_text() + ";; a note saved meanwhile\n")
            temp.replace(definitions)
            saved.append(True)
        return real(source, *args)

    monkeypatch.setattr(dsl, name, saving_first)
    getattr(cortex, f"{change}_webhook")(hook if change == "add" else "ci")
    text = definitions.read_text()
    assert ";; a note saved meanwhile" in text and ("(defwebhook ci" in text) == (change == "add")


def test_add_webhook_refuses_a_name_in_force_and_remove_webhook_what_the_file_lacks(cortex, org):
    definitions = org / "definitions.hy"
    before = definitions.read_text()
    taken = cx.WebhookDefinition(name="github-events", path="/hooks/other", provider=cx.Provider.GITHUB, secret="s")
    with pytest.raises(UserError, match="a webhook named 'github-events' is already defined; remove it first"):
        cortex.add_webhook(taken)
    with pytest.raises(NotFound, match=re.escape(f"{definitions}: no definition named nope")):
        cortex.remove_webhook("nope")
    assert definitions.read_text() == before
    definitions.unlink()
    with pytest.raises(NotFound, match=re.escape(f"no webhook named 'github-events': {definitions} does not exist")):
        cortex.remove_webhook("github-events")


def test_remove_webhook_sends_you_to_the_org_file_that_defines_it(cortex, org):
    notes = org / "notes" / "hooks.org"
    notes.write_text('* Hooks\n#+begin_src hy :cortex yes\n(defwebhook triage :path "/hooks/triage" '
                     ':provider standard :secret "secret://env/TRIAGE")\n#+end_src\n')
    cortex.ingest()
    with pytest.raises(UserError, match=re.escape(f"webhook 'triage' is defined at {notes}:3:1, not in {org}")):
        cortex.remove_webhook("triage")


def test_webhook_server_serves_the_definitions_on_the_port_asked_with_the_body_cap(cortex, monkeypatch):
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", "whsec_stripe_s3cr3t")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    service, server = cortex.webhook_server("127.0.0.1", port, max_body=64)
    assert sorted(service.endpoints) == ["/hooks/github", "/hooks/stripe"] and service.warnings == []
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive()
            time.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        routed = cortex.webhook_test("github-events", {"action": "opened"}, url=url)
        assert (routed.status, routed.outcome, routed.agent) == (200, "routed", "assistant")
        too_big = cortex.webhook_test("github-events", {"action": "opened", "pad": "x" * 64}, url=url)
        assert too_big.status == 413
    finally:
        server.should_exit = True
        thread.join(timeout=10)
