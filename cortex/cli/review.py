"""`cortex review`: the writes of agents under review, listed with their patches, shown, accepted or rejected."""

from __future__ import annotations

import click
from rich.text import Text

from ..words import brief, counted
from .common import Commands, cortex_options, console, err_console, open_cortex, with_cortex

STATUSES = ("pending", "accepted", "rejected", "all")
PATCH_STYLE = {"+": "green", "-": "red", "@": "cyan"}


@click.group(name="review", cls=Commands, invoke_without_command=True)
@click.option("--agent", metavar="NAME", help="Only this agent's proposals.")
@click.option("--status", type=click.Choice(STATUSES), default="pending", show_default=True,
              help="Which proposals: those waiting, those decided, or all.")
@cortex_options
@click.pass_context
def review_group(ctx, agent, status, store, org_root, no_org) -> None:
    """Writes of agents under review (proposals): list those waiting, each with its patch; show, accept
    (headline by headline with --only) or reject one."""
    if ctx.invoked_subcommand is not None:  # `review --store X accept ID`: the store named before serves it too
        given = {key: value for key, value in (("store", store), ("org_root", org_root), ("no_org", no_org)) if value}
        ctx.default_map = {name: given for name in ctx.command.commands}
        return
    with open_cortex(store, org_root, no_org) as cx:
        found = cx.proposals(None if status == "all" else status, agent)
        for proposal in found:
            _print(cx, proposal)
        err_console.print(f"{counted(len(found), 'proposal')} {'' if status == 'all' else status + ' '}"
                          f"{'of ' + brief(agent) if agent else ''}".rstrip(), markup=False)


@review_group.command()
@click.argument("proposal")
@with_cortex
def show(cx, proposal):
    """Show PROPOSAL (its id, or a unique prefix): who, when, what, and the patch of each change."""
    _print(cx, cx.proposal(proposal))


@review_group.command()
@click.argument("proposal")
@click.option("--only", "only", metavar="HEADLINE", multiple=True,
              help="Take only this headline's change (its :ID: or outline path, as `review show` names it); "
                   "repeatable: the rest of the proposal stays out.")
@with_cortex
def accept(cx, proposal, only):
    """Merge PROPOSAL into the working state, headline by headline, in one commit; the Org folder receives it.
    What changed meanwhile is kept; a true conflict stays in the file as a :CONFLICT: copy (exit 1)."""
    done = cx.accept_proposal(proposal, list(only) or None)
    console.print(str(done), markup=False, highlight=False)
    if done.conflicts:
        err_console.print("conflicts: both versions are in the files, the proposal's tagged :CONFLICT:; keep one "
                          "and delete the other (`cortex conflicts` lists them)")
        raise SystemExit(1)


@review_group.command()
@click.argument("proposal")
@click.option("--reason", default="", help="Why: kept with the proposal, which the agent can read.")
@with_cortex
def reject(cx, proposal, reason):
    """Reject PROPOSAL: it never reaches the files; it stays listed (--status rejected) with its reason."""
    decided = cx.reject_proposal(proposal, reason)
    console.print(f"rejected {decided.id}" + (f": {decided.reason}" if decided.reason else ""), markup=False)


def _print(cx, proposal) -> None:
    """A proposal's heading and message (and how it was decided), then (while it waits) its patch."""
    heading, *rest = proposal.lines()
    console.print(Text(heading, style="bold"))
    for line in rest:
        console.print(line, markup=False, highlight=False)
    if proposal.pending:
        for line in cx.proposal_patch(proposal.id).splitlines():
            console.print(Text("  " + line, style=PATCH_STYLE.get(line[:1], "")))


commands = (review_group,)
