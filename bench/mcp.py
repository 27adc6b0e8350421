"""`cortex mcp`: a tool call over stdio (search, memory_add) against the same cortex.api call made in process.

Each is timed two ways: the median wall-clock round trip, and the CPU time per call of every process involved
(client and server, all threads), which other work on the machine inflates less. The protocol's cost is the
MCP call's CPU time less that of the tool's own body run in process (target: < 2 ms); an empty round trip (ping)
shows the SDK's own floor. A server bound to one agent searches indexes of that agent's files: its search body is
timed against the api's search of everything.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import examples_copy, report

# This file is named mcp.py, and its folder comes first on sys.path: drop it, so that `mcp` is the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
import anyio  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

import cortex.api as cx  # noqa: E402
from cortex.mcp.session import Session  # noqa: E402
from cortex.mcp.tools import Tools  # noqa: E402

CALLS = 200
QUERIES = ["which region hosts staging?", "E1042", "deploy questions", "dark mode", "rate limit", "test suite"]
TICK = os.sysconf("SC_CLK_TCK")


def queries() -> list[str]:
    return [QUERIES[n % len(QUERIES)] for n in range(CALLS)]


def facts(label: str) -> list[str]:
    return [f"Fact {n} added {label}, a sentence of ordinary length." for n in range(CALLS)]


def children_cpu() -> float:
    """CPU seconds used so far by this process's running children (the server), all threads."""
    total = 0.0
    for entry in os.listdir("/proc"):
        try:
            fields = (Path("/proc") / entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(os.getpid()):
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def measured(calls) -> tuple[float, float]:
    """(median wall ms, CPU ms per call of this process and its children) of running each call, in order."""
    times, cpu = [], time.process_time() + children_cpu()
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    cpu = time.process_time() + children_cpu() - cpu
    return statistics.median(times) * 1e3, cpu / len(times) * 1e3


def in_process(store: Path, org: Path) -> dict[str, tuple[float, float]]:
    """Each call made in this process: the api call itself, and the MCP tool's body around it."""
    with cx.open(store, org) as c:
        c.ingest()
        c.build_search()
        for query in QUERIES:  # their vectors are kept in memory after the first search
            c.search(query)
        tools, bound = Tools(Session(c)), Tools(Session(c, "assistant"))
        for query in QUERIES:
            bound.search(query=query)
        return {
            "search bound body": measured(lambda q=q: bound.search(query=q) for q in queries()),
            "search api": measured(lambda q=q: c.search(q) for q in queries()),
            "search body": measured(lambda q=q: tools.search(query=q) for q in queries()),
            "memory_add api": measured(lambda t=t: c.memory.add_item("assistant", "fact", t) for t in facts("api")),
            "memory_add body": measured(lambda t=t: tools.memory_add(text=t, agent="assistant")
                                        for t in facts("tool body")),
        }


async def over_stdio(store: Path, org: Path) -> dict[str, tuple[float, float]]:
    """Each call made as a client makes it: a tool call to `cortex mcp` over stdio."""
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "cortex"),
                                   args=["mcp", "--store", str(store), "--org", str(org)], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for query in QUERIES:
            await session.call_tool("search", {"query": query})

        async def measured_calls(calls) -> tuple[float, float]:
            times, cpu = [], time.process_time() + children_cpu()
            for call in calls:
                start = time.perf_counter()
                result = await call()
                times.append(time.perf_counter() - start)
                assert not getattr(result, "is_error", False), result.content
            cpu = time.process_time() + children_cpu() - cpu
            return statistics.median(times) * 1e3, cpu / len(times) * 1e3

        tool = session.call_tool
        return {"ping": await measured_calls([session.send_ping] * CALLS),
                "search": await measured_calls(lambda q=q: tool("search", {"query": q}) for q in queries()),
                "memory_add": await measured_calls(lambda t=t: tool("memory_add", {"agent": "assistant", "text": t})
                                                   for t in facts("over stdio"))}


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="cortex-bench-mcp-"))
    try:
        org, store = folder / "org", folder / "store"
        examples_copy(org)
        local = in_process(store, org)
        remote = anyio.run(over_stdio, store, org)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{CALLS} calls each on the bundled org/ examples; baseline: the same cortex.api call in process")
    for tool in ("search", "memory_add"):
        (api_wall, api_cpu), (_, body_cpu), (wire_wall, wire_cpu) = \
            local[f"{tool} api"], local[f"{tool} body"], remote[tool]
        report(f"{tool}: MCP over stdio, median round trip", wire_wall, api_wall, unit="ms")
        report(f"{tool}: MCP over stdio, CPU per call (client + server)", wire_cpu, api_cpu, unit="ms",
               target=f"protocol {wire_cpu - body_cpu:.2f} ms CPU per call (target < 2 ms)")
        report(f"{tool}: the tool's body in process, CPU per call", body_cpu, api_cpu, unit="ms")
    report("search: a server bound to one agent, its body in process, CPU per call", local["search bound body"][1],
           local["search api"][1], unit="ms", target="its own indexes: no dearer than the api's search")
    report("an empty round trip (ping) over stdio, CPU per call", remote["ping"][1], local["search api"][1], unit="ms",
           target="the SDK's floor, as a share of a search")


if __name__ == "__main__":
    main()
