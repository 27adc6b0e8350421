"""`cortex review` through click's runner: the proposals of agents under review listed with their patches, shown,
accepted (whole, or some headlines), rejected with a reason; bad ids in one line."""

import pytest

import cortex.api as cx
from cortex.cli import main
from cortex.memory.agents import MemoryContext
from cortex.memory.items import MemoryItem

MEMORY = "agents/assistant/memory.org"


@pytest.fixture
def proposed(tmp_path, org):
    """Two proposals of the assistant, made under review: a fact and a procedure."""
    with cx.open(tmp_path / "store", org, review=True) as c:
        c.ingest()
        c.memory.add_item("assistant", "fact", "The staging database moved to eu-west-2.")
        c.memory.add_item("assistant", "procedure", "Rotate the deploy key every 90 days.")
        return [p.id for p in c.proposals()]


class Ran:
    def __init__(self, exit_code, stdout, stderr):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr


@pytest.fixture
def run(tmp_path, org, capsys):
    """`cortex review ARGS` as the command line runs it: its exit status, what it printed on stdout and stderr."""
    def invoke(*args):
        capsys.readouterr()
        try:
            main(["review", *args, "--store", str(tmp_path / "store"), "--org", str(org)])
            code = 0
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return invoke


def test_review_lists_each_proposal_with_its_patch(run, proposed):
    listed = run()
    assert listed.exit_code == 0 and listed.stderr == "2 proposals pending\n"
    lines = listed.stdout.splitlines()
    assert lines[0].startswith(f"{proposed[0]}  assistant  ") and lines[0].endswith(f"  add  {MEMORY}")
    assert lines[1] == "  saved the memory of assistant"
    assert lines[2].startswith(f"  added    {MEMORY}: Facts / The staging database moved to eu-west-2. [mem-")
    assert "  +** The staging database moved to eu-west-2." in lines and "  +:SOURCE:   api" in lines
    assert run("show", proposed[1][:4]).stdout.splitlines()[2].startswith(
        f"  added    {MEMORY}: Procedures / Rotate the deploy key every 90 days.")
    assert run("--agent", "reviewer").stderr == "0 proposals pending of reviewer\n"


def test_accept_merges_into_the_files_and_reject_keeps_the_reason(run, proposed, org):
    accepted = run("accept", proposed[0])
    assert accepted.exit_code == 0 and accepted.stdout.startswith(f"accepted {proposed[0]}: 1 file changed, as snapshot ")
    assert "undo with `cortex rollback " in accepted.stdout
    assert "eu-west-2" in (org / MEMORY).read_text()
    rejected = run("reject", proposed[1], "--reason", "we rotate every 30 days")
    assert rejected.stdout == f"rejected {proposed[1]}: we rotate every 30 days\n"
    assert "Rotate the deploy key" not in (org / MEMORY).read_text()
    listed = run("--status", "rejected").stdout.splitlines()
    assert listed[0].endswith(": we rotate every 30 days") and len(listed) == 2
    again = run("accept", proposed[1])
    assert again.exit_code == 1 and again.stderr == f"cortex: proposal {proposed[1]} was rejected already\n"


def test_accept_only_one_headline_of_a_proposal(tmp_path, org, run):
    with cx.open(tmp_path / "store", org, review=True) as c:
        c.ingest()
        c.memory.save_context("assistant", MemoryContext(facts=[MemoryItem("Kept."), MemoryItem("Left out.")]))
        [proposal] = c.proposals()
    taken = run("accept", proposal.id, "--only", "Facts / Kept.")
    assert taken.exit_code == 0 and taken.stdout.startswith(f"accepted {proposal.id} (only Facts / Kept.): ")
    assert "Kept." in (org / MEMORY).read_text() and "Left out." not in (org / MEMORY).read_text()


@pytest.mark.parametrize("args, says", [
    (("show", "zzz"), "cortex: 'zzz' is not a proposal id (up to 8 hex digits); `cortex review` lists the pending "
                      "ones\n"),
    (("accept", "1234"), "cortex: no proposal 1234; `cortex review` lists the pending ones\n"),
    (("reject", "abc", "--reason", "x" * 3000), "cortex: a reason is text of at most 2,000 characters; got "
                                                "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… (3,000 characters)\n"),
])
def test_a_bad_value_is_one_line(run, proposed, args, says):
    done = run(*args)
    assert done.exit_code == 1 and done.stderr == says
