"""Items that say the same thing, or what replaced what: found by meaning (embeddings) and by the words two items
differ in, with no language model. Pure: the caller gives the embedder, `embed(texts)`, rows of unit length.

Two items are *similar* when the cosine of their texts' embeddings is at least `SIMILAR`. Of a similar pair,
the words they differ in (lower-cased, stemmed, small words dropped, number words as digits) tell what
the newer one is to the older one (`relation`):

- a *successor* (supersede) when a value changed: the words they differ in hold a number, an identifier or
  a name (a capitalised word inside a sentence), or say that something changed ("now", "moved", "switched",
  "no longer"...), or only a few words were swapped in an otherwise shared sentence;
- a *duplicate* (merge) when they differ in no word that carries meaning, or are as close in meaning as
  `DUPLICATE` says, with no value among the words they differ in;
- neither when they say something of different subjects: a word before the first verb of one was swapped for
  another before the first verb of the other ("The cache of billing is Redis 7" / "The cache of search is
  Redis 7"). A memory of many facts of one kind is full of such pairs, close in meaning and both true.

Two sentences said of one subject (the same words before their first verb) are similar from `SAME_SUBJECT`:
a changed value can move a short sentence's embedding further than another subject does.

A successor taken for a duplicate would lose the newer fact when merged; a duplicate taken for a successor
only archives the older copy. So when in doubt, a pair is a successor. The thresholds were chosen on
tests/data/similar_infrastructure.json and checked on tests/data/similar_people.json, the subject rule on a
memory of templated facts (tests/scenarios/test_facts_that_change.py) and checked on pairs of both sets said of
two subjects; bench/memory.py reports precision and recall on both sets.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import Stemmer

if TYPE_CHECKING:  # numpy loads with the embedder that makes the vectors: a memory that embeds nothing needs none
    import numpy as np

__all__ = ["DUPLICATE", "SAME_SUBJECT", "SIMILAR", "Embed", "Relation", "close_pairs", "differing", "relation",
           "same_subject_pairs", "similar_to", "subject_of"]

Embed = Callable[[Sequence[str]], "np.ndarray"]

SIMILAR = 0.70  # the cosine from which two items are said to be similar
SAME_SUBJECT = 0.55  # the same, for two sentences said of one subject (the words before their first verb)
DUPLICATE = 0.88  # the cosine from which similar items with no value between them are the same fact

_TOKEN = re.compile(r"[^\W_]+(?:[-.@/:,'’_+][^\W_]+)*")
_IDENTIFIER = re.compile(r"[\d.@/:_]")
_SMALL = frozenset("""a an the this that these those it its there here i me my we us our you your he him his she
    her they them their is are was were be been being am do does did has have had will would shall should can
    could may might must of in on at by for with from to into onto over under about as than then and or but
    if so such every each all any some also just very what which who whom whose""".split())
_CHANGED = """now moved moves switched switches upgraded downgraded promoted rewritten migrated changed
    changes replaced became becomes renamed instead no not never longer anymore stopped quit former formerly
    previously currently"""
_NUMBERS = {word: str(n) for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBERS.update({word: str(n) for n, word in zip(range(30, 100, 10),
                                                 "thirty forty fifty sixty seventy eighty ninety".split())})
# Verbs a fact is often said with: what comes before the first is its subject.
_VERBS = frozenset("""is are was were has have had became becomes uses prefers prefer likes like loves love hates
    hate wants want needs need drives drive drinks drink owns own lives live speaks speak teaches teach runs moved
    switched""".split())  # (not those that are nouns as often: reports, stores, hosts, costs, points...)
_local = threading.local()  # a Stemmer object must not be shared between threads


@dataclass(frozen=True)
class Relation:
    """What a newer item is to an older similar one: `duplicate` or `supersede`, the cosine of their texts, and
    the words each holds that the other does not (as written)."""

    kind: str
    score: float
    gone: tuple[str, ...] = ()  # words of the older one only
    came: tuple[str, ...] = ()  # words of the newer one only

    @property
    def why(self) -> str:
        """The words they differ in, `16 → 17`, or that they differ in none."""
        if not self.gone and not self.came:
            return "no word that carries meaning differs"
        return f"{' '.join(self.gone) or '∅'} → {' '.join(self.came) or '∅'}"


@dataclass(frozen=True)
class _Word:
    key: str  # what is compared: lower-cased, stemmed (identifiers and numbers whole)
    text: str  # as written
    value: bool  # a number, an identifier or a name


def similar_to(embed: Embed, text: str, texts: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """The indexes of the `texts` similar to `text` (cosine >= SIMILAR, or SAME_SUBJECT for one said of the same
    subject), but those said of another subject, with their cosines, closest first, at most `limit`."""
    if not texts or limit <= 0:
        return []
    vectors = embed([text, *texts])
    scores = vectors[1:] @ vectors[0]
    subject = subject_of(text)
    found = [int(n) for n in (scores >= SAME_SUBJECT).nonzero()[0] if not _said_of_another(texts[n], text) and (
        scores[n] >= SIMILAR or subject is not None and subject_of(texts[n]) == subject)]
    return [(n, float(scores[n])) for n in sorted(found, key=lambda n: -scores[n])[:limit]]


def close_pairs(vectors: np.ndarray, per_item: int = 4, block: int = 1024) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cosine), i < j, of rows at least SIMILAR apart, each row with at most `per_item` of its
    closest others, closest pairs first; the cosines are computed `block` rows at a time."""
    pairs: dict[tuple[int, int], float] = {}
    n = len(vectors)
    keep = min(per_item, n - 1)
    for start in range(0, n, block):
        scores = vectors[start:start + block] @ vectors.T
        scores[range(len(scores)), range(start, start + len(scores))] = -1.0  # not an item with itself
        if keep <= 0:
            break
        best = (-scores).argpartition(keep - 1, axis=1)[:, :keep]
        for row, columns in enumerate(best):
            for column in columns:
                score = float(scores[row, column])
                if score >= SIMILAR:
                    i, j = sorted((start + row, int(column)))
                    pairs[(i, j)] = score
    return sorted(((i, j, s) for (i, j), s in pairs.items()), key=lambda p: (-p[2], p[0], p[1]))


def relation(older: str, newer: str, score: float) -> Relation | None:
    """What `newer` is to `older`, whose embeddings are `score` apart: a duplicate, a successor, or None (not
    similar, or similar with too little in common to say)."""
    if " ".join(older.split()).casefold() == " ".join(newer.split()).casefold():
        return Relation("duplicate", 1.0)
    if score < SIMILAR and not (score >= SAME_SUBJECT and subject_of(older) == subject_of(newer) is not None):
        return None
    old, new = _words(older), _words(newer)
    gone, came = differing(old, new), differing(new, old)
    found = Relation("supersede", score, tuple(w.text for w in gone), tuple(w.text for w in came))
    if _other_subject(older, newer, gone, came):
        return None  # said of another subject: two facts, neither replacing the other
    valued = any(w.value for w in came) and (not gone or any(w.value for w in gone))
    if valued or any(w.key in _CHANGED for w in gone + came) or len(gone) == len(came) == 1:
        return found  # a value replaced or added, a change said, or one word swapped for another
    if not gone and not came or score >= DUPLICATE:
        return Relation("duplicate", score, found.gone, found.came)
    shared = len({w.key for w in old} & {w.key for w in new})
    return found if shared >= len(gone) + len(came) else None


def _said_of_another(older: str, newer: str) -> bool:
    """Whether two sentences are said of different subjects (`_other_subject`)."""
    old, new = _words(older), _words(newer)
    return _other_subject(older, newer, differing(old, new), differing(new, old))


def _other_subject(older: str, newer: str, gone: list[_Word], came: list[_Word]) -> bool:
    """Whether two sentences are said of different subjects: a word before the first verb of one was swapped for
    another before the first verb of the other ("The cache of billing is Redis 7" / "The cache of search is
    Redis 6"), or, where no verb is known, the words they differ in stand in the first half of each while the
    second halves are alike ("The web team deploys on Tuesdays")."""
    parts = [_split_at_verb(older), _split_at_verb(newer)]
    if None not in parts:
        subjects = [{w.key for w in _words(subject)} for subject, _ in parts]
        return any(w.key in subjects[0] for w in gone) and any(w.key in subjects[1] for w in came)
    words = [_words(older), _words(newer)]
    heads = [{w.key for w in side[:len(side) // 2]} for side in words]
    tails = [{w.key for w in side[len(side) // 2:]} for side in words]
    return (bool(gone and came) and tails[0] == tails[1] and all(w.key in heads[0] for w in gone)
            and all(w.key in heads[1] for w in came))


def subject_of(text: str) -> frozenset[str] | None:
    """The words (as compared) before a sentence's first verb, or None when it has no verb or nothing before it."""
    parts = _split_at_verb(text)
    keys = frozenset(w.key for w in _words(parts[0])) if parts else None
    return keys or None


def same_subject_pairs(texts: Sequence[str], vectors: np.ndarray) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cosine), i < j, of texts said of one subject at least SAME_SUBJECT apart: a value that changed
    can move a sentence's embedding further than another subject does."""
    groups: dict[frozenset[str], list[int]] = {}
    for n, text in enumerate(texts):
        if (subject := subject_of(text)) is not None:
            groups.setdefault(subject, []).append(n)
    pairs = []
    for rows in groups.values():
        if len(rows) > 1:
            scores = vectors[rows] @ vectors[rows].T
            pairs += [(rows[a], rows[b], float(scores[a, b])) for a in range(len(rows))
                      for b in range(a + 1, len(rows)) if scores[a, b] >= SAME_SUBJECT]
    return pairs


def _split_at_verb(text: str) -> tuple[str, str] | None:
    """A sentence as what comes before its first verb (one of the common ones a fact is said with) and the rest."""
    for match in _TOKEN.finditer(text):
        if match.group().casefold() in _VERBS:
            return text[:match.start()], text[match.end():]
    return None


def differing(words: list[_Word], others: list[_Word]) -> list[_Word]:
    """The words of `words` (each once) that are not among `others`: a word is another of the same key, or,
    not a value, whose key starts with its own or with which its own starts (4 letters or more: `cert`,
    `certif`; `allergi`, `allerg`)."""
    theirs = {w.key for w in others}
    stems = sorted(w.key for w in others if not w.value and len(w.key) >= 4)
    seen: set[str] = set()
    out = []
    for w in words:
        if w.key in theirs or w.key in seen or not w.value and _prefixed(w.key, stems):
            continue
        seen.add(w.key)
        out.append(w)
    return out


def _prefixed(key: str, stems: list[str]) -> bool:
    """Whether `key` (4 letters or more) starts one of the sorted `stems`, or one of them starts it."""
    if len(key) < 4:
        return False
    at = bisect_left(stems, key)
    return at < len(stems) and stems[at].startswith(key) or any(key.startswith(stem) for stem in stems[:at])


def _words(text: str) -> list[_Word]:
    """The words of `text` that carry meaning: small words dropped, number words as digits, a negation as `not`,
    others stemmed; a number, an identifier, or a capitalised word that does not start a sentence is a value."""
    found = []
    end = 0
    starts = True  # whether the next word starts a sentence
    for match in _TOKEN.finditer(text):
        raw = match.group()
        starts = starts or any(mark in text[end:match.start()] for mark in ".!?:;")
        end = match.end()
        word = re.sub(r"['’]s$", "", raw.casefold())
        first, starts = starts, False
        if word in _SMALL:
            continue
        word = "not" if word.endswith(("n't", "n’t")) else _NUMBERS.get(word, word)
        whole = bool(_IDENTIFIER.search(word))
        found.append(_Word(word if whole else _stem(word), raw, whole or (raw[0].isupper() and not first)))
    return found


def _stem(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer.stemWord(word)


_CHANGED = frozenset(["not", *map(_stem, _CHANGED.split())])  # the words that say a value changed, stemmed
