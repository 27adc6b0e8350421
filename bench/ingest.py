"""Ingest cost on the shared corpus, as ratios against orgparse and the cold ingest, in one run;
then hostile files, as ratios against an ordinary file of the same size.

    .venv/bin/python bench/ingest.py                      everything
    .venv/bin/python bench/ingest.py pathological [MB]    only the hostile files (default 1 MB)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import best_of, corpus_copy, corpus_files, report, untracked

import orgparse

import cortex.api as cx
from cortex.org import Layout, parse, reparse


def orgparse_alone(files: list[Path]) -> None:
    for path in files:
        orgparse.loadi(path.read_text().split("\n"))


def main() -> None:
    files = corpus_files()
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    org = work / "org"
    corpus_copy(org)
    size = sum(p.stat().st_size for p in org.rglob("*.org"))
    print(f"corpus: {len(files)} files, {size / 1e6:.2f} MB")

    baseline = best_of(lambda: orgparse_alone(files), repeat=2)
    report("orgparse.loadi over the corpus (baseline)", baseline, baseline)

    def cold():
        store = work / "store-cold"
        shutil.rmtree(store, ignore_errors=True)
        untracked(org)
        with cx.open(store, org) as c:
            c.ingest()

    cold_s = best_of(cold, repeat=2)
    report("cortex cold ingest vs orgparse alone", cold_s, baseline, target="(bar <= 1.5)")

    with cx.open(work / "store-cold", org) as c:
        unchanged = best_of(lambda: c.ingest(), repeat=3)
        report("re-ingest, nothing changed, vs cold ingest", unchanged, cold_s, target="(bar <= 0.05)")

        largest = max(org.rglob("*.org"), key=lambda p: p.stat().st_size)
        original = largest.read_text()
        lines = original.split("\n")
        middle = len(lines) // 2

        def one_line_edit(n: int) -> float:
            """Seconds to re-ingest the file after an edit (saving it, the editor's part, is not timed)."""
            lines[middle] = lines[middle] + f" edited {n}"
            largest.write_text("\n".join(lines))
            start = time.perf_counter()
            c.ingest(largest)
            return time.perf_counter() - start

        # The first edit a process sees parses the file whole (as a one-shot `cortex ingest` does);
        # later ones start from the layout it kept and read only the edited sections.
        first_edit_s = one_line_edit(0)
        edit_s = min(one_line_edit(n) for n in range(1, 8))
        largest.write_text(original)
        c.ingest(largest)

    def cold_single():
        store = work / "store-single"
        shutil.rmtree(store, ignore_errors=True)
        untracked(org)
        with cx.open(store, org) as single:
            single.ingest(largest)

    single_s = best_of(cold_single, repeat=3)
    print(f"largest file: {largest.relative_to(org)} ({largest.stat().st_size / 1e6:.2f} MB)")
    report("first edit in a process: re-ingest vs cold ingest", first_edit_s, single_s)
    report("one-line edit re-ingest vs cold ingest of that file", edit_s, single_s, target="(bar < 0.05)")
    shutil.rmtree(work)
    pathological()


def fill(unit: str, size: int, head: str = "") -> str:
    """`head`, then `unit` repeated up to about `size` characters."""
    return head + unit * max(1, (size - len(head)) // len(unit))


def deep(size: int) -> str:
    """Headlines each one level below the one before, about `size` characters."""
    lines, total, level = [], 0, 0
    while total < size:
        level += 1
        lines.append("*" * level + f" level {level}\n")
        total += len(lines[-1])
    return "".join(lines)


# Each hostile file as (its text, where an edit inserts what): every one of them once cost time
# quadratic (deep nesting: cubic) in its size, or made the re-parse raise RecursionError.
HOSTILE = {
    "deep nesting (edit: the deepest section)":
        lambda n: (deep(n), -1, "deepest text\n"),
    "spaces in a headline (edit: one more space)":
        lambda n: ("* a" + " " * n + "x\n", n // 2, " "),
    "unterminated DEADLINE: < (edit: in the line)":
        lambda n: (fill("DEADLINE: <", n, "* a\n"), n // 2, "x"),
    "unclosed #+begin_src under #+TODO (edit: a line)":
        lambda n: (fill("#+begin_src\n", n, "* a\n#+TODO: X\n"), -1, "x\n"),
    "unclosed blocks, all names (edit: a line)":
        lambda n: ("* a\n#+TODO: X\n" + "".join(f"#+begin_b{i}\n" for i in range(n // 14)), -1, "x\n"),
    "unclosed drawers under #+TODO (edit: a line)":
        lambda n: (fill(":drawer:\n", n, "* a\n#+TODO: X\n"), -1, "x\n"),
    "unclosed dynamic blocks under #+TODO (edit: a line)":
        lambda n: (fill("#+BEGIN: x\n", n, "* a\n#+TODO: X\n"), -1, "x\n"),
    "unclosed LaTeX under #+TODO (edit: a line)":
        lambda n: (fill("\\begin{eq}\n", n, "* a\n#+TODO: X\n"), -1, "x\n"),
    "#+TODO lines among src blocks (edit: a line)":
        lambda n: (fill("#+begin_src\nx\n#+end_src\n#+TODO: A\n", n, "* a\n"), -1, "x\n"),
    "TODO keywords x headlines (edit: a headline)":
        lambda n: ("#+TODO: " + " ".join(f"K{i}" for i in range(n // 12)) + "\n" + fill("* K1 x\n", n // 2),
                   -1, "* K2 y\n"),
    "a run of one character (edit: slides along it)":
        lambda n: ("* a\n* b\n" + "x" * n + "\n* c\n", n // 2, "x"),
}


def ordinary(size: int) -> tuple[str, int, str]:
    """Ordinary Org text of about `size` characters (no two subtrees alike), and a one-line edit in its middle."""
    units, total, n = [], 0, 0
    while total < size:
        n += 1
        units.append(f"* Heading {n} :tag:\nSCHEDULED: <2024-01-01 Mon>\nSome text {n}.\n"
                     f"** Child {n}\n:PROPERTIES:\n:ID: id-{n}\n:END:\nMore text.\n")
        total += len(units[-1])
    text = "".join(units)
    return text, text.index("Some text", size // 2), "More "


def parse_and_edit(text: str, at: int, insert: str) -> tuple[float, float]:
    """Seconds to parse `text`, and to re-parse it after `insert` at `at` (-1: the end) from its layout
    (parsing whole when the re-parse declines), as the first edit a process sees."""
    parse_s = best_of(lambda: parse(text), repeat=2)
    parsed, data = parse(text), text.encode()
    at = len(data) if at < 0 else len(text[:at].encode())
    edited = data[:at] + insert.encode() + data[at:]
    get = {o.oid: o for o in parsed.objects}.__getitem__
    edit_s = best_of(lambda: reparse(Layout.of(data, parsed), edited, get)
                     or parse(edited.decode()), repeat=2)
    return parse_s, edit_s


def pathological(size: int = 1_000_000) -> None:
    """Parse and edit cost of hostile files of `size` bytes, as ratios against parsing an ordinary one."""
    print(f"hostile files of {size / 1e6:.2f} MB (ratios against parsing an ordinary file of that size)")
    base, base_edit = parse_and_edit(*ordinary(size))
    report("ordinary file: parse (baseline)", base, base)
    report("ordinary file: one-line edit re-parse", base_edit, base)
    for name, make in HOSTILE.items():
        parse_s, edit_s = parse_and_edit(*make(size))
        report(f"{name}: parse", parse_s, base, target="(bar < 3)")
        report(f"{name}: re-parse", edit_s, base, target="(bar < 3)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["pathological"]:
        pathological(int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 1_000_000)
    else:
        main()
