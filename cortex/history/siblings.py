"""Which headlines of two lists of siblings are one headline: the pairing `diff` and the merge of working
copies share, so that they always agree on identity.

Strongest evidence first: equal oids (the same subtree, wherever it moved in the list); equal :ID:; equal
titles with the same text (:ID: lines aside, as org-id adds them) or the same children; then, comparing a
version with its base (`loose`), the same text under another title (a retitle), between the same
neighbours first; then position among same-titled siblings; last, the same children under another
title. Each rule is a lookup by key in queues built once, so a list costs time linear in its length.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Collection

from ..hashing import Oid
from ..objects import Headline, OrgObject
from ..org import Section

Getter = Callable[[Oid], OrgObject]


def pair(xs: list, ys: list, get: Getter, *, loose: bool, moving: Collection[str] = (),
         gone: frozenset[Oid] = frozenset()) -> dict[int, int]:
    """Pair entries of two lists of siblings that are one headline: index in `xs` -> index in `ys`.

    Equal oids first, then equal :ID:, then equal titles keeping their body, then their children;
    `loose` then pairs those keeping their body (a retitle); then equal titles in order; last,
    `loose` pairs those keeping their children. Two different :ID:s never pair, a headline `moving` (by
    its :ID:, to another list) pairs by :ID: only, and an entry of `xs` that is `gone` (erased from `ys`)
    pairs only with itself. Entries are oids, or other values (runs of them) that pair only with themselves.
    """
    pairs: dict[int, int] = {}
    waiting: dict[object, deque[int]] = defaultdict(deque)
    for j, y in enumerate(ys):
        waiting[y].append(j)
    for i, x in enumerate(xs):
        if waiting.get(x):
            pairs[i] = waiting[x].popleft()
    paired = set(pairs.values())
    rest_x = [i for i in range(len(xs)) if i not in pairs and xs[i] not in gone]
    rest_y = [j for j in range(len(ys)) if j not in paired]
    if not (rest_x and rest_y):
        return pairs
    hx = {i: get(xs[i]) for i in rest_x}
    hy = {j: get(ys[j]) for j in rest_y}
    ids: dict[str, deque[int]] = defaultdict(deque)
    for j in rest_y:
        if hy[j].id is not None:
            ids[hy[j].id].append(j)
    for i in rest_x:
        if ids.get(hx[i].id):
            pairs[i] = ids[hx[i].id].popleft()
    if moving:  # a headline known to have moved is that headline, by its :ID: only
        hx = {i: h for i, h in hx.items() if h.id not in moving}
        hy = {j: h for j, h in hy.items() if h.id not in moving}
    # A headline without an :ID: pairs with a same-titled one keeping its text, :ID: lines aside
    # (org-id adds them), or its children; one that lost its :ID: pairs only after.
    keeping = [(lambda i: (hx[i].title, _unidentified(hx[i])), lambda j: (hy[j].title, _unidentified(hy[j]))),
               (lambda i: hx[i].children and (hx[i].title, hx[i].children),
                lambda j: hy[j].children and (hy[j].title, hy[j].children))]
    keys = [(*key, ids) for ids in ("added", "any") for key in keeping]
    if loose:
        anchors = sorted(pairs.items())
        kept = [anchors[k] for k in increasing([j for _, j in anchors])]
        x_at, y_at = [i for i, _ in kept], [j for _, j in kept]

        def gap_x(i: int) -> int:
            return bisect_left(x_at, i)

        def gap_y(j: int) -> int:
            return bisect_left(y_at, j)

        # A retitle keeps its body: between the same neighbours first, then anywhere in the list (a
        # side may also have moved a neighbour) if the body has text, as a bare headline's is no evidence.
        keys += [(lambda i: (gap_x(i), _body(hx[i])), lambda j: (gap_y(j), _body(hy[j])), "any"),
                 (lambda i: _body(hx[i]).strip() and ("body", _body(hx[i])),
                  lambda j: _body(hy[j]).strip() and ("body", _body(hy[j])), "any")]
    # Then position among same-titled siblings (two without an :ID: first: one with an :ID: new
    # here may have moved in), and last, for a retitle, the same children: a new headline given
    # another's children (moved into it) is not that one.
    keys += [(lambda i: (hx[i].title,), lambda j: (hy[j].title,), ids) for ids in ("none", "added", "any")]
    if loose:
        keys += [(lambda i: hx[i].children and (gap_x(i), hx[i].children),
                  lambda j: hy[j].children and (gap_y(j), hy[j].children), "any"),
                 (lambda i: hx[i].children, lambda j: hy[j].children, "any")]
    for key_x, key_y, ids in keys:
        _pair_by(pairs, hx, hy, key_x, key_y, ids)
    return pairs


def _pair_by(pairs: dict[int, int], hx: dict[int, Headline], hy: dict[int, Headline],
             key_x: Callable[[int], object], key_y: Callable[[int], object], ids: str) -> None:
    """Pair the unpaired entries whose keys are equal (falsy keys never), in order. `ids` says which
    may pair, by their :ID:s: "none", two without; "added", an `xs` entry without with any; "any",
    also one with with one without (equal :ID:s were paired before; two different ones never pair)."""
    paired = set(pairs.values())
    queues: dict[tuple, deque[int]] = defaultdict(deque)
    for j in hy:
        if j not in paired and (key := key_y(j)):
            queues[key, hy[j].id is not None].append(j)
    for i in hx:
        if i in pairs or not (key := key_x(i)) or (hx[i].id and ids != "any"):
            continue
        with_id = None if hx[i].id or ids == "none" else queues.get((key, True))
        candidates = [q for q in (queues.get((key, False)), with_id) if q]
        if candidates:
            pairs[i] = min(candidates, key=lambda q: q[0]).popleft()


def increasing(values: list[int]) -> list[int]:
    """The positions of a longest strictly increasing subsequence of `values` (patience sorting)."""
    tails: list[int] = []
    tail_at: list[int] = []
    back = [-1] * len(values)
    for k, value in enumerate(values):
        at = bisect_left(tails, value)
        if at:
            back[k] = tail_at[at - 1]
        if at == len(tails):
            tails.append(value)
            tail_at.append(k)
        else:
            tails[at], tail_at[at] = value, k
    found, k = [], tail_at[-1] if tail_at else -1
    while k >= 0:
        found.append(k)
        k = back[k]
    return found[::-1]


def split_section(raw: str) -> tuple[str, str]:
    """A section's headline line (with its line end) and the rest."""
    at = raw.find("\n") + 1
    return (raw[:at], raw[at:]) if at else (raw, "")


def _unidentified(headline: Headline) -> str:
    """A section's text after its headline line, without its :ID: property (and its property drawer, left empty)."""
    section = Section.of(headline.raw)
    if section.drawer_end is None:
        return _body(headline)
    lines = headline.raw.split("\n")
    at, stop = section.drawer, section.drawer_end
    kept = [line for line, (name, _) in zip(lines[at + 1:stop], section.properties) if name.upper() != "ID"]
    return "\n".join([*lines[1:at], *([lines[at], *kept, lines[stop]] if kept else []), *lines[stop + 1:]])


def _body(headline: Headline) -> str:
    """A section's text after its headline line."""
    return split_section(headline.raw)[1]
