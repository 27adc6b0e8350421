"""`cortex webhook` (add, list, test, remove, logs, prune, redeliver) and `cortex serve`, the receiver."""

from __future__ import annotations

import json

import click

from ..errors import UserError
from ..listen import listen
from ..reads import read_bounded
from ..words import counted
from . import interrupted
from .common import (Commands, console, cortex_options, duration, err_console, open_cortex, stopped_by_ctrl_c, table,
                     with_cortex)

__all__ = ["serve_command", "webhook_group"]

PROVIDERS = ("github", "stripe", "slack", "standard", "custom", "jwt")
MAX_PAYLOAD = 16 << 20  # bytes of a payload read from a file (a receiver takes 1 MiB unless told otherwise)
MAX_KEY = 1 << 20  # bytes of a private key file


@click.group(name="webhook", cls=Commands)
def webhook_group() -> None:
    """Webhooks: define them, test them, and read or replay their delivery log."""


@webhook_group.command()
@click.argument("name")
@click.option("--path", required=True, help="URL path the receiver serves it at, e.g. /hooks/github.")
@click.option("--provider", required=True, type=click.Choice(PROVIDERS), help="How deliveries are signed.")
@click.option("--secret", help="secret://env/NAME, secret://file/PATH, or (discouraged) the secret itself.")
@click.option("--agent", help="Agent whose daily log receives each delivery.")
@click.option("--json-path", help="Accept only deliveries where this RFC 9535 JSONPath finds a value ...")
@click.option("--equals", help="... equal to this (numbers and true/false read as JSON, anything else as text).")
@click.option("--contains", help="... containing this (a substring, or a list element).")
@click.option("--header", help="custom: the header that carries the signature.")
@click.option("--prefix", default="", help="custom: text before the digest, e.g. sha256=.")
@click.option("--encoding", type=click.Choice(["hex", "base64"]), default="hex", show_default=True,
              help="custom: how the digest is written.")
@click.option("--hmac", type=click.Choice(["sha1", "sha256", "sha384", "sha512"]), default="sha256",
              show_default=True, help="custom: the hash the HMAC uses.")
@click.option("--algorithm", "algorithms", multiple=True, help="jwt: an allowed algorithm (repeatable), e.g. RS256.")
@click.option("--issuer", help="jwt: the required iss claim.")
@click.option("--audience", help="jwt: the required aud claim.")
@click.option("--public-key", help="jwt: the PEM public key, or secret://file/PATH holding it.")
@click.option("--body-hash-claim",
              help="jwt: the claim that must hold the SHA-256 of the body (binds a token to one delivery).")
@click.option("--max-lifetime", help="jwt: the longest a token may live from iat to exp, e.g. 5m.")
@cortex_options
def add(store, org_root, no_org, name, **options):
    """Add webhook NAME to the definitions file, keeping the rest of the file as it is."""
    from ..api import resolve_secret
    from ..dsl.options import OptionError, webhook_from_options

    try:  # every value is checked before the store opens
        definition = webhook_from_options(name, **options)
    except OptionError as err:
        if err.option is None:
            raise click.UsageError(err.message) from None
        raise click.BadParameter(err.message, param_hint=[err.option]) from None
    with open_cortex(store, org_root, no_org, create=True) as cx:
        target = cx.add_webhook(definition)
    if definition.secret and not definition.secret.startswith("secret://"):
        err_console.print(resolve_secret(definition.secret, name).warning, style="yellow", markup=False)
    agent = f", to agent {definition.agent}" if definition.agent else ""
    console.print(f"added webhook {name}: POST {definition.path} ({definition.provider.value}{agent}) in {target}",
                  markup=False)


@webhook_group.command(name="list")
@with_cortex
def list_(cx):
    """The webhooks in force, with where each is defined (secrets stay hidden)."""
    t = table("name", "path", "provider", "agent", "filter", "secret", "defined at")
    inside = f"{cx.root}/" if cx.root is not None else None  # a file of the Org folder is named from it
    for w in cx.definitions().webhooks:
        t.add_row(w.name, w.path, w.provider.value, w.agent or "-", _filter_text(w.filter), _secret_text(w),
                  str(w.location).removeprefix(inside) if w.location and inside else str(w.location or "session"))
    console.print(t)


@webhook_group.command()
@click.argument("name")
@click.option("--payload", required=True, help="The JSON body, or @FILE to read it from a file.")
@click.option("--event", help="Event type to send (X-GitHub-Event for GitHub, else X-Event-Type).")
@click.option("--url", help="Deliver over HTTP to a running `cortex serve`, e.g. http://127.0.0.1:8787.")
@click.option("--tamper", is_flag=True, help="Change the body after signing: it must be rejected.")
@click.option("--stale", is_flag=True, help="Sign an hour ago: timestamped schemes must reject it.")
@click.option("--private-key", type=click.Path(exists=True, dir_okay=False),
              help="jwt with RS/ES/PS/EdDSA algorithms: the PEM private key to sign the token with.")
@with_cortex(create=True)
def test(cx, name, payload, event, url, tamper, stale, private_key):
    """Sign PAYLOAD with webhook NAME's real scheme and secret and deliver it; show what happened.

    Exits 1 when the answer is not what the test expects: a delivery accepted (2xx), or with
    --tamper or --stale, rejected.
    """
    if payload.startswith("@"):
        payload = _read_payload(payload[1:])
    key = read_bounded(private_key, MAX_KEY, "a private key") if private_key else None
    result = cx.webhook_test(name, payload, event=event, url=url, tamper=tamper, stale=stale, private_key=key)
    for label, value in result.summary():
        console.print(f"{label:9} {value}", markup=False)
    accepted = 200 <= result.status < 300
    if accepted == (tamper or stale):
        err_console.print(f"the {'tampered' if tamper else 'stale'} delivery was accepted" if accepted
                          else "the delivery was not accepted", markup=False)
        raise SystemExit(1)


@webhook_group.command()
@click.argument("name")
@with_cortex(create=True)
def remove(cx, name):
    """Remove webhook NAME from the definitions file, leaving the rest of it as it is."""
    target = cx.remove_webhook(name)
    console.print(f"removed webhook {name} from {target}", markup=False)


@webhook_group.command()
@click.option("--name", help="Only this webhook's deliveries.")
@click.option("--tail", type=click.IntRange(min=1), default=20, show_default=True, help="The last N deliveries.")
@with_cortex
def logs(cx, name, tail):
    """The delivery log, oldest first: answer, verification, filter and routing of each delivery."""
    deliveries = cx.webhook_logs(name, tail)
    if not deliveries:
        err_console.print("no deliveries" + (f" for webhook {name}" if name else ""))
        return
    rows = [d.row() for d in deliveries]
    t = table(*rows[0])
    for row in rows:
        t.add_row(*row.values())
    console.print(t)


@webhook_group.command()
@click.argument("age")
@with_cortex(create=True)
def prune(cx, age):
    """Remove logged deliveries older than AGE (7d, 12h, ...), with their kept bodies."""
    removed = cx.prune_webhook_logs(duration(age, "AGE"))
    console.print(f"removed {counted(removed, 'delivery', 'deliveries')} older than {age}", markup=False)


@webhook_group.command()
@click.argument("delivery_id", metavar="ID")
@with_cortex(create=True)
def redeliver(cx, delivery_id):
    """Run logged delivery ID (or a unique prefix of it) through filtering and routing again (not verification: its
    signature may be stale)."""
    delivery = cx.webhook_redeliver(delivery_id)
    console.print(f"redelivered {delivery.redelivery_of} as {delivery.id}: {delivery.status} {delivery.outcome}"
                  + (f" to agent {delivery.agent}" if delivery.outcome == "routed" else "")
                  + (f" ({delivery.detail or delivery.filter_reason})" if delivery.outcome != "routed" else ""),
                  markup=False)


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8787, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--max-body", type=click.IntRange(1, 1 << 30), default=1 << 20, show_default=True,
              help="Largest body accepted, in bytes; larger ones get 413.")
@click.option("--keep-logs", default="30d", show_default=True, help="How long logged deliveries are kept.")
@with_cortex(create=True)
def serve_command(cx, host, port, max_body, keep_logs):
    """Receive webhook deliveries over HTTP at the paths the definitions declare."""
    service, server = cx.webhook_server(host, port, max_body, duration(keep_logs, "--keep-logs"))
    listen(host, port).close()  # an address no socket can listen at is refused in one line, before serving
    for warning in service.warnings:
        err_console.print(warning, style="yellow", markup=False)
    if not service.endpoints:
        where = cx.definitions_path if cx.root is not None else "a marked block of an Org file"
        err_console.print(f"no webhooks are defined; add one with `cortex webhook add` or in {where}")
    for path, endpoint in service.endpoints.items():
        d = endpoint.definition
        console.print(f"POST {path} -> {d.name} ({d.provider.value}"
                      + (f", agent {d.agent}" if d.agent else "") + ")", markup=False)
    cx.build_search_in_background(lambda line: err_console.print(line, markup=False))  # while serving
    server.stop = interrupted  # a Ctrl-C lost while it started
    with stopped_by_ctrl_c():
        server.run()


def _filter_text(f) -> str:
    if f is None:
        return "-"
    return f"{f.json_path} == {json.dumps(f.equals)}" if f.equals is not None else \
        f"{f.json_path} contains {json.dumps(f.contains)}"


def _secret_text(w) -> str:
    if w.jwt and w.jwt.public_key is not None:
        return "public key"
    if w.secret is None:
        return "-"
    return w.secret if w.secret.startswith("secret://") else "inline"


def _read_payload(path: str) -> str:
    try:
        return read_bounded(path, MAX_PAYLOAD, "a payload").decode("utf-8")
    except OSError as err:
        raise UserError(f"--payload @{path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"--payload @{path}: not UTF-8 text") from None


commands = (webhook_group, serve_command)
