"""Agent writes a person reviews, end to end: two agents write through MCP servers started with --review (real
processes, the SDK's client), a person reviews them from another process and another store handle while editing
the same files in working copies (LMDB, and PostgreSQL as another machine would): some proposals accepted whole,
one headline by headline, one rejected. Nothing is lost, the rejected write never reaches a file, and every
accepted one is in every working copy after its next sync."""

import shutil
import subprocess
import sys
from pathlib import Path

import cortex.api as cx

from tests.conftest import EXAMPLES
from tests.mcp_client import stdio_server

CORTEX = str(Path(sys.executable).parent / "cortex")
MEMORY = "agents/assistant/memory.org"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def review(store: str, *args: str) -> str:
    """`cortex review ARGS` run by a person in a process of their own."""
    done = subprocess.run([CORTEX, "review", *args, "--store", store, "--no-org"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_agents_under_review_and_a_person_editing_and_reviewing_lose_nothing(store_at, tmp_path):
    org, laptop = tmp_path / "org", tmp_path / "laptop"
    shutil.copytree(EXAMPLES, org)
    with cx.open(store_at, org) as person:
        person.ingest()
        person.checkout(laptop)
    servers = ("--store", store_at, "--no-org", "--review")
    with stdio_server(tmp_path / "assistant.log", *servers, "--agent", "assistant") as assistant, \
            stdio_server(tmp_path / "scraper.log", *servers, "--agent", "scraper") as scraper:
        two = assistant.call("memory_add", text="Deploys now need two approvals.")["proposal"]
        limit = assistant.call("memory_add", text="The API rate limit is 200 requests per minute.",
                               supersedes="mem-assistant-rate-limit")
        forget = assistant.call("memory_forget", item="mem-assistant-dark-mode")["proposal"]
        hourly = scraper.call("memory_add", text="Prices are scraped hourly.")["proposal"]
        robots = scraper.call("memory_add", text="The scraper ignores robots.txt.")["proposal"]
        # Meanwhile the person edits assistant's memory.org in both working copies.
        edit(laptop / MEMORY, "Run the test suite before", "Run the whole test suite before")
        edit(org / MEMORY, "usually mean the Tuesday", "almost always mean the Tuesday")
        with cx.open(store_at, org) as person:  # another store handle: as another machine's
            person.sync(laptop)
            person.ingest()
            assert {p.id for p in person.proposals()} == {two, limit["proposal"], forget, hourly, robots}
            assert "two approvals" not in person.show(MEMORY)  # nothing landed before review
        listed = review(store_at)  # another process
        assert f"{robots}  scraper  " in listed and "+** The scraper ignores robots.txt." in listed
        review(store_at, "accept", two)
        review(store_at, "reject", robots, "--reason", "robots.txt is respected")
        with cx.open(store_at, folder=False) as person:
            person.accept_proposal(limit["proposal"], only=[limit["id"]])  # the new item, not the old one's end
            person.accept_proposal(forget)
            person.accept_proposal(hourly)
            assert person.proposals() == [] and person.fsck() == []
        assert assistant.call("proposals")["pending"] == []
        assert scraper.call("proposals")["rejected"][0]["reason"] == "robots.txt is respected"
        assert "Deploys now need two approvals." in assistant.call("memory_inspect")["memory_org"]
    with cx.open(store_at, org) as person:
        person.ingest()
        person.sync(laptop)
        for copy in (org, laptop):  # every working copy, after its next sync
            memory = (copy / MEMORY).read_text()
            assert "Deploys now need two approvals." in memory and "200 requests per minute" in memory
            assert "The API rate limit is 100 requests per minute." in memory and ":INVALID_AT:" not in memory
            assert "dark mode" not in memory and ":CONFLICT:" not in memory
            assert "Run the whole test suite before" in memory and "almost always mean the Tuesday" in memory
            scraped = (copy / "agents/scraper/memory.org").read_text()
            assert "Prices are scraped hourly." in scraped and "robots.txt" not in scraped
        assert "robots.txt" not in "".join(person.show(path) for path in person.working().entries)
