"""The tour notebook runs top to bottom in a real kernel and shows what its text promises."""

import re
import sys
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

from cortex.hashing import hash_bytes

from tests.conftest import EXAMPLES

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "tour.ipynb"
ORG = EXAMPLES
SECONDS = 60


class Tour(NamedTuple):
    """The executed notebook, the folder it worked in, and the repository's org/ before it ran."""

    nb: nbformat.NotebookNode
    work: Path
    before: dict[str, str]


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under `folder` and the hash of its bytes."""
    return {p.relative_to(folder).as_posix(): str(hash_bytes(p.read_bytes()))
            for p in sorted(folder.rglob("*")) if p.is_file()}


def kernel_manager() -> KernelManager:
    """A manager for ipykernel's own `python3` spec, which runs this interpreter.

    Searching no kernel folders leaves only that built-in spec, so a `python3` kernelspec
    installed elsewhere on the machine, for another Python, cannot be picked instead.
    """
    return KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    """The notebook executed on a copy of org/ in a temporary folder, with the repository's files before and after."""
    run = tmp_path_factory.mktemp("tour")
    work = run / "work"
    before = fingerprint(ORG)
    with pytest.MonkeyPatch.context() as env:  # the kernel inherits these; the home folder stays untouched
        env.setenv("CORTEX_TOUR_ORG", str(ORG))
        env.setenv("CORTEX_TOUR_DIR", str(work))
        env.setenv("IPYTHONDIR", str(run / "ipython"))
        env.setenv("JUPYTER_RUNTIME_DIR", str(run / "runtime"))
        nb = nbformat.read(NOTEBOOK, as_version=4)
        client = NotebookClient(nb, km=kernel_manager(), timeout=SECONDS,
                                resources={"metadata": {"path": str(run)}})
        client.execute()
    return Tour(nb, work, before)


def output(nb, cell_id: str) -> str:
    """What a code cell printed."""
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def test_the_kernel_runs_this_interpreter():
    km = kernel_manager()
    assert km.kernel_spec.argv[0] == sys.executable


def test_the_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_every_cell_ran_without_error(tour):
    nb = tour.nb
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert all(output(nb, c.id).strip() for c in code), "every step shows something"


def test_the_tour_changes_its_copy_never_the_repository(tour):
    assert fingerprint(ORG) == tour.before
    assert "rotate both this week" in (tour.work / "org" / "notes" / "projects.org").read_text(encoding="utf-8")


def test_ingest_and_reingest_report_what_they_did(tour):
    nb = tour.nb
    files = len(list(ORG.rglob("*.org")))
    assert output(nb, "ingest").startswith(f"{files} files, {files} parsed")
    edit = output(nb, "edit")
    assert "parsed: ['notes/projects.org']" in edit
    assert f"unchanged files: {files - 1}" in edit
    # the headline, its parent, the document, its folder and the tree at most
    assert 1 <= int(re.search(r"new objects: (\d+)", edit)[1]) <= 5


def test_find_and_show(tour):
    nb = tour.nb
    shown = output(nb, "find")
    assert "notes/projects.org:25: Memory store / Rotate the webhook secrets" in shown
    assert ":ID:       task-rotate-secrets" in shown


def test_diff_and_rollback(tour):
    nb = tour.nb
    assert "changed  notes/projects.org: Deploy pipeline / Staging database migration [task-staging-migration]" \
        in output(nb, "diff")
    refused = output(nb, "rollback-refused")
    assert "edits that no snapshot has" in refused and "notes/projects.org" in refused
    assert "on disk: Blocked on the schema review." in output(nb, "rollback-keep")
    assert "on disk: Unblocked: the schema review passed." in output(nb, "rollback-undo")
    history = output(nb, "log").split("\n\n")[1].splitlines()
    assert [line.split()[1] for line in history] == ["text", "added"]  # newest first, as the log


def test_search(tour):
    nb = tour.nb
    assert "Tuesday release train" in output(nb, "search-meaning").splitlines()[0]
    identifier = output(nb, "search-identifier").splitlines()
    assert "E1042" in identifier[0]
    assert identifier[-1].startswith("fused ")
    filtered, as_of = output(nb, "search-filters").split("\n\n")
    assert filtered.splitlines() and all(" agents/assistant/" in line for line in filtered.splitlines())
    assert "User prefers dark mode" in filtered.splitlines()[0]
    now, then = as_of.splitlines()
    assert now.startswith("working") and "Unblocked" in now
    assert then.startswith("HEAD~1") and "Blocked on the schema review" in then


def test_agent_memory(tour):
    nb, work = tour.nb, tour.work
    memory = (work / "org" / "agents" / "assistant" / "memory.org").read_text(encoding="utf-8")
    assert output(nb, "memory-show").strip() == memory.strip()
    assert "The database is Postgres 16." in memory and "Tag releases with the date." in memory
    assert "Postgres 16" in output(nb, "memory-search").splitlines()[0]


def test_webhook_delivery_is_routed_into_the_daily_log(tour):
    nb = tour.nb
    assert output(nb, "webhook-test").startswith("200 routed | verified: True | agent: assistant")
    logs = output(nb, "webhook-logs")
    delivery = logs.split()[0]
    assert f"- Delivery :: {delivery}" in logs and '"title": "Add rate limiting"' in logs
    assert output(nb, "webhook-tampered").startswith("401 rejected | signature_mismatch")


def test_conversation_is_recorded_in_the_daily_log(tour):
    nb, work = tour.nb, tour.work
    assert output(nb, "conversation").startswith("truncation | 2 turns")
    logs = sorted((work / "org" / "agents" / "assistant" / "logs").glob("*.org"))
    entry = output(nb, "record-session")
    assert entry.startswith("* ") and "Deploy questions" in entry and ":PEOPLE:   Ada, assistant" in entry
    assert "\n** Ada: When is the next deploy?\n** assistant: Tuesday, after the standup.\n" in entry
    assert any(entry.strip() in log.read_text(encoding="utf-8") for log in logs)
