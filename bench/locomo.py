"""Turn recall on LoCoMo's development half: each ranking's R@1/5/10/20 and MRR per question category.

    .venv/bin/python bench/locomo.py PATH/locomo10.json      (or a file holding only the development half)

LoCoMo (Maharana et al. 2024) holds long conversations between two people and questions whose evidence names
the turns that answer them ("D3:12": session 3, turn 12). Only the development half is read: the five
conversations DEV names; the others are held out to judge the result and are never read here. Its data is not
part of cortex (its licence is non-commercial): PATH is where you keep it.

Each conversation is one agent's memory, logged by `record_session` as cortex keeps conversations: a daily log
per day (agents/<conversation>/logs/YYYY-MM-DD.org), one level-1 session entry `* HH:MM — Session N` per session
with its :SESSION: and :PEOPLE:, one level-2 headline `** Speaker: first line of the turn` per turn (a shared
photo's caption as a line of the body). Questions are asked through `Cortex.search(q, agent=<conversation>)`;
BM25 alone and the cosine alone rank the same items under the same filter. A question's recall@k is the share
of its evidence turns in the top k (LoCoMo's own metric); MRR is the reciprocal rank of the first of them.
Categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (left out of "1-4").
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from _common import REPO  # noqa: F401  (puts the repository first on sys.path)

import numpy as np

import cortex.api as cx
from cortex.memory.conversation.orglog import Utterance
from cortex.search.fusion import METHODS
from cortex.search.index import Filters

DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")  # the development half; never the others
DEPTHS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D(\d+):(\d+)")


def development_half(path: Path) -> list[dict]:
    """The conversations of DEV in `path` (the original locomo10.json or a file of some of them), in DEV's order."""
    samples = {s["sample_id"]: s for s in json.loads(path.read_text(encoding="utf-8")) if s["sample_id"] in DEV}
    if missing := [name for name in DEV if name not in samples]:
        raise SystemExit(f"{path}: no conversation {', '.join(missing)}")
    return [samples[name] for name in DEV]


def sessions(conversation: dict) -> list[tuple[int, datetime, list[dict]]]:
    """(number, start, turns) of each session of a conversation, in order."""
    found = []
    for key, turns in conversation.items():
        if m := re.fullmatch(r"session_(\d+)", key):
            when = datetime.strptime(conversation[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            found.append((int(m[1]), when, turns))
    return sorted(found, key=lambda s: s[0])


def turn_text(turn: dict) -> str:
    """What a turn said, and the caption of the photo it shared, if any."""
    text = turn["text"].strip()
    if caption := turn.get("blip_caption"):
        text += f"\n[shared {caption}]"
    return text


def write_logs(c, sample: dict) -> dict[tuple[str, tuple[int, ...]], tuple[str, str]]:
    """Log one conversation's sessions with `record_session`, as cortex keeps conversations; return each turn's
    (path, position) -> (dia_id, speaker)."""
    agent, conversation = sample["sample_id"], sample["conversation"]
    entries: dict[str, int] = defaultdict(int)  # session entries in each day's log so far
    where: dict[tuple[str, tuple[int, ...]], tuple[str, str]] = {}
    for number, when, turns in sessions(conversation):
        path = c.memory.record_session(agent, [Utterance(t["speaker"], turn_text(t), at=when) for t in turns],
                                       title=f"Session {number}", session=f"{agent}-{number}")
        where.update(((path, (entries[path], n)), (turn["dia_id"], turn["speaker"])) for n, turn in enumerate(turns))
        entries[path] += 1
    return where


def evidence(question: dict) -> set[str]:
    """The dia_ids a question's evidence names (a few are written loosely: "D8:6; D9:17", "D:11:26")."""
    return {f"D{s}:{t}" for s, t in _EVIDENCE.findall(" ".join(question["evidence"]).replace("D:", "D"))}


class Scores:
    """Recall at each depth and reciprocal ranks of one ranking, per category."""

    def __init__(self):
        self.recall = defaultdict(lambda: defaultdict(list))
        self.reciprocal = defaultdict(list)

    def add(self, category: int, ranked: list[str | None], wanted: set[str]) -> None:
        for depth in DEPTHS:
            self.recall[category][depth].append(len(wanted & set(ranked[:depth])) / len(wanted))
        first = next((n for n, found in enumerate(ranked, 1) if found in wanted), None)
        self.reciprocal[category].append(1 / first if first else 0.0)

    def row(self, categories) -> list[float]:
        picked = [c for c in categories if c in self.reciprocal]
        return [float(np.mean([r for c in picked for r in self.recall[c][d]])) for d in DEPTHS] + \
            [float(np.mean([r for c in picked for r in self.reciprocal[c]]))]


def rankings(c, index, agent: str, question: str) -> dict[str, list]:
    """The 20 best items of each ranking for `question` in `agent`'s memory."""
    found = {"default": [r.item for r in c.search(question, agent=agent, limit=20)]}
    for method in METHODS:
        found[method] = [r.item for r in c.search(question, agent=agent, limit=20, fusion=method)]
    mask = index._filter_mask(Filters(agent=agent))
    found["bm25"] = [index.items[key] for key, _ in index.keyword.search(question, 20, mask)]
    found["cosine"] = [index.items[key] for key, _ in index.vector.search(index.queries(question), 20, mask)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="locomo10.json, or a file holding only the development half")
    args = parser.parse_args()
    samples = development_half(args.path)
    work = Path(tempfile.mkdtemp(prefix="cortex-locomo-"))
    try:
        logged: dict[tuple[str, tuple[int, ...]], tuple[str, str]] = {}
        with cx.open(work / "store", work / "org") as c:
            started = time.perf_counter()
            for sample in samples:
                logged.update(write_logs(c, sample))
            status = c.build_search()
            print(f"{len(samples)} conversations, {len(logged):,} turns, {status.items:,} items "
                  f"(logged, ingested and embedded in {time.perf_counter() - started:.1f} s)")
            index = c._search_index
            first = {(i.path, i.position): i.text for i in index.items.values()}
            if stray := [at for at, (_, speaker) in logged.items() if not first.get(at, "").startswith(speaker + ":")]:
                raise SystemExit(f"turns not where they were logged: {stray[:3]}")
            where = {at: dia for at, (dia, _) in logged.items()}
            scores: dict[str, Scores] = defaultdict(Scores)
            asked = 0
            started = time.perf_counter()
            for sample in samples:
                for qa in sample["qa"]:
                    wanted = evidence(qa)
                    if not wanted:
                        continue
                    asked += 1
                    for name, items in rankings(c, index, sample["sample_id"], qa["question"]).items():
                        scores[name].add(qa["category"], [where.get((i.path, i.position)) for i in items], wanted)
            print(f"{asked} questions, {time.perf_counter() - started:.0f} s for all the rankings\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    groups = {"1-4": (1, 2, 3, 4), **{f"{n} {name}": (n,) for n, name in CATEGORIES.items()}}
    print(f"{'ranking':10}{'questions':>22}" + "".join(f"{f'R@{d}':>7}" for d in DEPTHS) + f"{'MRR':>7}")
    for name, score in scores.items():
        for group, categories in groups.items():
            count = sum(len(score.reciprocal[c]) for c in categories)
            print(f"{name if group == '1-4' else '':10}{group:>17}{count:5d}"
                  + "".join(f"{value:7.3f}" for value in score.row(categories)))


if __name__ == "__main__":
    main()
