"""Secrets: literal, env and file sources, missing ones named, and values never shown."""

import logging
import os
import subprocess
import sys
import traceback

import pytest

from cortex.errors import UserError
from cortex.webhooks import (
    MissingSecret,
    Secret,
    redact_headers,
    resolve_secret,
    verifier_for,
)

VALUE = "s3cr3t-v4lue-8d1f"


def test_a_literal_secret_resolves_with_a_warning_naming_the_webhook():
    resolved = resolve_secret(VALUE, "github-push")
    assert resolved.secret.reveal() == VALUE
    assert "github-push" in resolved.warning and "secret://env/" in resolved.warning
    assert VALUE not in resolved.warning


def test_an_env_secret_resolves_without_warning(monkeypatch):
    monkeypatch.setenv("CORTEX_TEST_HOOK_SECRET", VALUE)
    resolved = resolve_secret("secret://env/CORTEX_TEST_HOOK_SECRET", "github-push")
    assert resolved.secret.reveal() == VALUE and resolved.warning is None


def test_an_explicit_environment_mapping_is_used():
    assert resolve_secret("secret://env/HOOK", "h", environ={"HOOK": VALUE}).secret.reveal() == VALUE


def test_a_missing_env_secret_names_the_webhook_and_variable(monkeypatch):
    monkeypatch.delenv("CORTEX_TEST_ABSENT", raising=False)
    with pytest.raises(MissingSecret) as caught:
        resolve_secret("secret://env/CORTEX_TEST_ABSENT", "stripe-payments")
    message = str(caught.value)
    assert "'stripe-payments'" in message and "CORTEX_TEST_ABSENT" in message and "not set" in message
    assert isinstance(caught.value, UserError)
    assert caught.value.webhook == "stripe-payments"


def test_an_empty_env_secret_is_missing():
    with pytest.raises(MissingSecret, match="empty"):
        resolve_secret("secret://env/HOOK", "h", environ={"HOOK": ""})


def test_a_bad_variable_name_is_a_user_error():
    with pytest.raises(UserError, match="not an environment variable name"):
        resolve_secret("secret://env/MY-SECRET", "h", environ={})


@pytest.mark.parametrize("content, expected", [
    (VALUE + "\n", VALUE),
    (VALUE + "\r\n", VALUE),
    (VALUE, VALUE),
    (VALUE + "\n\n", VALUE + "\n"),
    (" " + VALUE + " \n", " " + VALUE + " "),
])
def test_a_file_secret_loses_exactly_one_trailing_newline(tmp_path, content, expected):
    path = tmp_path / "hook.secret"
    path.write_bytes(content.encode())
    assert resolve_secret(f"secret://file/{path}", "h").secret.reveal() == expected


def test_a_relative_file_secret_is_read_from_the_base_dir(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "gh").write_text(VALUE + "\n")
    assert resolve_secret("secret://file/secrets/gh", "h", base_dir=tmp_path).secret.reveal() == VALUE


def test_a_binary_file_secret_stays_bytes_every_one_of_them(tmp_path):
    path = tmp_path / "key.bin"
    path.write_bytes(b"\x00\xff\x10key\n")  # a 0x0a that ends a binary key is part of it
    assert resolve_secret(f"secret://file/{path}", "h").secret.reveal() == b"\x00\xff\x10key\n"
    path.write_bytes(b"\xff\r\n")
    assert resolve_secret(f"secret://file/{path}", "h").secret.reveal() == b"\xff\r\n"


def test_a_secret_in_the_environment_that_is_not_utf8_is_named_not_a_traceback():
    undecodable = b"s3cr\xe9t".decode("utf-8", "surrogateescape")  # how Python hands such bytes over
    with pytest.raises(MissingSecret, match="'ci'.*'HOOK' is not UTF-8 text.*secret://file/"):
        resolve_secret("secret://env/HOOK", "ci", environ={"HOOK": undecodable})


def test_a_missing_file_secret_names_the_webhook_and_file(tmp_path):
    path = tmp_path / "nowhere.secret"
    with pytest.raises(MissingSecret) as caught:
        resolve_secret(f"secret://file/{path}", "slack-events")
    assert "'slack-events'" in str(caught.value) and str(path) in str(caught.value)
    assert "does not exist" in str(caught.value)


def test_an_empty_or_unreadable_file_secret_is_missing(tmp_path):
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(MissingSecret, match="is empty"):
        resolve_secret(f"secret://file/{tmp_path / 'empty'}", "h")
    with pytest.raises(MissingSecret, match="cannot be read"):
        resolve_secret(f"secret://file/{tmp_path}", "h")


@pytest.mark.parametrize("spec, message", [
    ("secret://vault/kv/hook", "unknown secret source 'vault'"),
    ("secret://file/", "needs a path"),
    ("", "empty"),
])
def test_malformed_secret_specs_are_user_errors(spec, message):
    with pytest.raises(UserError, match=message):
        resolve_secret(spec, "h")


def test_a_secret_never_shows_its_value(caplog):
    secret = Secret(VALUE)
    assert repr(secret) == str(secret) == f"{secret}" == "Secret('***')"
    assert VALUE not in repr([secret, {"k": secret}])
    with caplog.at_level(logging.INFO):
        logging.getLogger("cortex.test").info("using %s / %r", secret, secret)
    assert VALUE not in caplog.text and "Secret('***')" in caplog.text


def test_a_secret_stays_hidden_in_an_error_and_its_traceback():
    secret = Secret(VALUE)
    try:
        raise UserError(f"webhook 'h' rejected with {secret!r}")
    except UserError as err:
        text = "".join(traceback.TracebackException.from_exception(err, capture_locals=True).format())
    assert VALUE not in text


def test_secrets_compare_by_value_and_convert_to_bytes():
    assert Secret(VALUE) == Secret(VALUE.encode())
    assert Secret(VALUE) != Secret(VALUE + "x")
    assert len({Secret(VALUE), Secret(VALUE)}) == 1
    assert Secret("é").as_bytes() == "é".encode()
    with pytest.raises(TypeError):
        Secret(42)


def test_a_resolved_secret_feeds_a_verifier(monkeypatch):
    monkeypatch.setenv("CORTEX_TEST_GH", "It's a Secret to Everybody")
    secret = resolve_secret("secret://env/CORTEX_TEST_GH", "gh").secret
    github = verifier_for("github", secret)
    assert github.sign(b"Hello, World!") == {
        "X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}


def test_redact_headers_hides_signatures_and_credentials_and_keeps_the_rest():
    headers = {
        "Content-Type": "application/json",
        "X-Hub-Signature-256": "sha256=abc",
        "Stripe-Signature": "t=1,v1=abc",
        "X-Slack-Signature": "v0=abc",
        "X-Slack-Request-Timestamp": "1531420618",
        "webhook-id": "msg_1",
        "webhook-signature": "v1,abc",
        "Authorization": "Bearer eyJ...",
        "Cookie": "session=1",
        "X-Api-Key": "k",
        "X-Shop-Check": "abc",
    }
    redacted = redact_headers(headers, extra=["x-shop-check"])
    assert list(redacted) == list(headers)
    assert {name for name, value in redacted.items() if value == "***"} == {
        "X-Hub-Signature-256", "Stripe-Signature", "X-Slack-Signature", "webhook-signature", "Authorization",
        "Cookie", "X-Api-Key", "X-Shop-Check"}
    assert redacted["X-Slack-Request-Timestamp"] == "1531420618" and redacted["webhook-id"] == "msg_1"
    assert headers["Authorization"] == "Bearer eyJ..."  # the original is untouched


def test_redact_headers_covers_every_verifier_header():
    custom = verifier_for("custom", "k", {"header": "X-Shop-Check"})
    signed = custom.sign(b"body")
    assert set(redact_headers(signed, extra=custom.header_names).values()) == {"***"}


def test_cortex_serve_names_a_secret_variable_that_is_not_utf8(tmp_path, org):
    env = {**os.environ, "STRIPE_WEBHOOK_SECRET": "whsec_c3RyaXBlLXMzY3IzdA==", "GITHUB_WEBHOOK_SECRET": b"s3cr\xe9t"}
    done = subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                           "serve", "--store", str(tmp_path / "store"), "--org", str(org), "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "'github-events': secret environment variable 'GITHUB_WEBHOOK_SECRET' is not UTF-8 text" in done.stderr
