"""`cortex lsp` over stdio (pygls's own client) against what it stands on, measured in the same run:

  workspace symbol          a workspace/symbol round trip, JSON over the server's pipes as an editor reads it
                            (`Wire`), vs `Cortex.search` of the same query in process, its results named and
                            placed (heading, file, line) as the symbols are (target <= 1.2x); and its floor,
                            the round trip of an empty answer
  one-headline edit         a didChange of one heading until the buffer's diagnostics are published, vs the
                            one-line re-ingest of the same edit saved in a twin copy, in turns (target <= 2x)
  start to first answer     from exec to the first hover answered (and to the `initialize` answer), vs the
                            REPL's start on the same folder: its first answer (the file's outline typed the
                            moment its line editor is up), target <= 1x, and bench/startup.py's moments (its
                            prompt drawn, a key echoed, its line editor up, its start-up ingest shown), both with
                            bytecode cached as on an ordinary install (startup.py's ENV)

    python bench/lsp.py [--runs N] [--corpus]     (--corpus: the workspace symbol and the start on shared/corpus too)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import CORPUS, corpus_copy, examples_copy, report
from startup import ENV, first_answer, interactive

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

import cortex.api as cx

CORTEX = str(Path(__import__("sys").executable).parent / "cortex")
QUERIES = ["which region hosts staging?", "E1042", "deploy questions", "dark mode", "rate limit", "test suite"]
FILE = "notes/projects.org"
HEADING = "* Memory store"
ROUNDS = 4  # of the queries, each side; the first warms up (the server builds its search in the background)
WARM = 2  # edits and re-ingests not counted: the server's first sync runs under the first


async def started(store: Path, org: Path, file: str = FILE) -> tuple[LanguageClient, dict, float, float]:
    """A client of a new server, the diagnostics it publishes (by uri: (version, time)), seconds to its
    `initialize` answer and to the first hover answered (on `file`'s first heading)."""
    client, published = LanguageClient("bench", "1"), {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def got(params):
        published[params.uri] = (params.version, time.perf_counter())

    text = (org / file).read_text()
    line = next(n for n, heading in enumerate(text.split("\n")) if heading.startswith("*"))
    began = time.perf_counter()
    await client.start_io(CORTEX, "lsp", "--store", str(store), "--org", str(org), env=ENV)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    initialized = time.perf_counter() - began
    client.initialized(types.InitializedParams())
    uri = from_fs_path(str(org / file))
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="org", version=1, text=text)))
    hovered = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=1)))
    assert hovered is not None, "no hover on a heading"
    return client, published, initialized, time.perf_counter() - began


async def stopped(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def start_to_first_answer(store: Path, org: Path, file: str, runs: int, where: str) -> None:
    """Start to the `initialize` answer and to the first hover, against the REPL's start on the same folder,
    taken in turns. Like for like, the baseline is the REPL's first answer: the outline of the same file,
    `(len (ls FILE))`, typed the moment its line editor is up (it answers once its start-up ingest is done, while
    the server's first sync goes on after it answers). The REPL's earlier moments answer nothing: its prompt is
    drawn and keys echo by a banner, then its line editor is up."""
    headings = len(re.findall(r"(?m)^\*+[ \t]", (org / file).read_text()))
    starts, prompts, answers = [], [], []
    for _ in range(runs):
        client, _, initialized, hovered = await started(store, org, file)
        starts.append((initialized, hovered))
        await stopped(client)
        prompts.append(interactive(store, org))
        answers.append(first_answer(store, org, f'(len (ls "{file}"))', f"\n{headings}\r"))
    first = statistics.median(s[1] for s in starts)
    report(f"initialize answered{where} vs REPL prompt drawn", statistics.median(s[0] for s in starts),
           statistics.median(p[0] for p in prompts))
    report(f"start to first answer{where} vs REPL first answer", first, statistics.median(answers),
           target=" (like for like, target <= 1)")
    for n, what in enumerate(["prompt drawn", "key echoed", "line editor up", "start-up ingest shown"]):
        report(f"start to first answer{where} vs REPL {what}", first, statistics.median(p[n] for p in prompts))


class Wire:
    """`cortex lsp` spoken to as an editor does, JSON over its pipes: a round trip is the server's answer and its
    bytes read and decoded, without a client library's typing of every field (pygls's client spends about
    2 ms structuring 50 symbols, which no editor's JSON reader does)."""

    def __init__(self, store: Path, org: Path):
        self.server = subprocess.Popen([CORTEX, "lsp", "--store", str(store), "--org", str(org)], env=ENV,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ids = iter(range(1, 1 << 30))
        self.request("initialize", {"capabilities": {}, "processId": None, "rootUri": None})
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.server.stdin.flush()

    def receive(self) -> dict:
        length = None
        while (line := self.server.stdout.readline()) not in (b"\r\n", b"\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.server.stdout.read(length))

    def request(self, method: str, params: dict) -> dict:
        ident = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while (answer := self.receive()).get("id") != ident or "method" in answer:
            pass  # a notification, or the server's own request
        return answer

    def symbol(self, query: str) -> tuple[float, int]:
        """Seconds of a workspace symbol there and back, and how many symbols it answered."""
        began = time.perf_counter()
        answer = self.request("workspace/symbol", {"query": query})
        return time.perf_counter() - began, len(answer["result"])

    def close(self) -> None:
        self.server.kill()
        self.server.wait()


async def edited(client: LanguageClient, published: dict, org: Path, version: int, title: str) -> float:
    """Seconds from a didChange of one heading until the diagnostics of that version are published."""
    uri = from_fs_path(str(org / FILE))
    text = (org / FILE).read_text().replace(HEADING, f"* {title}", 1)
    began = time.perf_counter()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    while published.get(uri, (None,))[0] != version:
        await asyncio.sleep(0.0005)
    return published[uri][1] - began


def reingest(c, org: Path, title: str) -> float:
    """Seconds of the re-ingest of the same one-line edit, saved."""
    path = org / FILE
    path.write_text(path.read_text().replace(HEADING, f"* {title}", 1))
    began = time.perf_counter()
    c.ingest()
    took = time.perf_counter() - began
    path.write_text(path.read_text().replace(f"* {title}", HEADING, 1))
    c.ingest()
    return took


async def main(runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-lsp-"))
    org, store = examples_copy(work / "org"), work / "store"
    with cx.open(store, org) as c:
        c.ingest()
        c.build_search()
    symbol, search, empty = symbols_on(store, org, QUERIES)  # the first round warms the model and indexes up
    twin = examples_copy(work / "twin")  # the re-ingest's own copy, so that edits and re-ingests alternate
    client, published, _, _ = await started(store, org)
    edits, ingests = [], []
    with cx.open(work / "twin-store", twin) as c:
        c.ingest()
        for n in range(WARM + runs * 4):  # in turns: a busy machine slows both alike
            edits.append(await edited(client, published, org, n + 2, f"Memory store {n}"))
            ingests.append(reingest(c, twin, f"Memory store {n}"))
    await stopped(client)
    edits, ingests = edits[WARM:], ingests[WARM:]
    report("workspace symbol (median)", symbol, search, target="vs Cortex.search in process (target <= 1.2)")
    report("  its floor: an empty answer's round trip", empty, search)
    report("one-headline edit to diagnostics (median)", statistics.median(edits), statistics.median(ingests),
           target="vs the one-line re-ingest (target <= 2)")
    await start_to_first_answer(store, org, FILE, runs, "")


CORPUS_FILE = "worg/org-tutorials/org4beginners.org"
CORPUS_QUERIES = ["how to install packages", "org babel source blocks", "keybindings for evil mode",
                  "export to latex", "agenda custom commands", "capture templates"]


def symbols_on(store: Path, org: Path, queries: list[str]) -> tuple[float, float, float]:
    """Median seconds of a workspace symbol over the wire, of the same search in process and of an empty answer
    over the wire (the floor), warm, taken in turns (one query each side), so that a busy machine slows both
    alike. Like for like, the search in process also
    names and places each result (its heading, file and line: what a symbol tells and `cortex search` prints),
    and both sides answer the same number of results."""
    wire = Wire(store, org)
    symbols, searches, empties = [], [], []
    with cx.open(store, org) as c:
        for query in queries * ROUNDS:
            took, answered = wire.symbol(query)
            symbols.append(took)
            empties.append(wire.symbol(" ")[0])
            began = time.perf_counter()
            found = [(r.heading, r.path, r.line) for r in c.search(query, limit=50, budget=cx.SEARCH_BUDGET)]
            searches.append(time.perf_counter() - began)
            assert len(found) == answered, f"{query!r}: {answered} symbols, {len(found)} results"
    wire.close()
    return tuple(statistics.median(times[len(queries):]) for times in (symbols, searches, empties))


def on_the_corpus(runs: int) -> None:
    """The workspace symbol and the start to the first answer on shared/corpus (13,561 headlines), its search
    built first."""
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-lsp-corpus-"))
    org, store = corpus_copy(work / "org"), work / "store"
    with cx.open(store, org) as c:
        c.ingest()
        c.build_search()
    symbol, search, empty = symbols_on(store, org, CORPUS_QUERIES)
    report("workspace symbol on the corpus (median)", symbol, search, target="vs Cortex.search in process (target <= 1.2)")
    report("  its floor: an empty answer's round trip", empty, search)
    asyncio.run(start_to_first_answer(store, org, CORPUS_FILE, runs, " on the corpus"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", action="store_true", help="also the workspace symbol on shared/corpus")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs))
    if arguments.corpus and CORPUS.is_dir():
        on_the_corpus(arguments.runs)
