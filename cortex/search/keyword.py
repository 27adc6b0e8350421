"""Keyword search: BM25 (bm25s) over stemmed words that keeps identifiers whole.

A document's first line is its title: its terms are indexed a second time under the TITLE prefix,
so that `title_matches` can tell the items whose title holds every word of a query.

bm25s cannot add or delete documents, so an index is a *base* built once plus two cheap edits:

- a deletion sets the document's weight to 0 in the base's `weight_mask`;
- an addition (or the new text of an edited document) goes into an *overlay*: an in-memory inverted
  list scored with the same BM25 formula ("lucene", as bm25s) and the statistics of base + overlay,
  so a search right after an edit sees it, on the same scale as the base documents.

Both make searches slightly worse as they grow (dead documents still count in the statistics; the
overlay is scored in Python), so `needs_rebuild` turns true once the changes exceed a fraction of the
base; the owner then builds a fresh index from its source of truth and swaps it in.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import threading
import warnings
from array import array
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import Stemmer

__all__ = ["K1", "TITLE", "KeywordIndex", "document_terms", "exact_terms", "query_terms", "title_terms", "tokenize"]

with warnings.catch_warnings():  # bm25s imports tqdm.auto, which warns in notebooks without ipywidgets
    warnings.simplefilter("ignore")
    import bm25s
from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS
from bm25s.tokenization import Tokenized

from cortex.errors import FormatError

FORMAT = 4  # 2: titles indexed as TITLE-prefixed terms; 3: k1 0.9, b 0.4; 4: the vocabulary as a `Vocabulary`
WEIGHTS_KEPT = 8  # masks whose document weights are kept (two agents' filters alternating cost one each)
# Term saturation and length normalisation (the overlay scores with the same). Short items of varied length,
# such as turns of a conversation, lose their answers to length normalisation at bm25s's defaults (1.5, 0.75):
# on LoCoMo's development half (bench/locomo.py) BM25 alone finds 0.620 of the evidence in its top 10 with
# these (Anserini's defaults), 0.577 with those.
K1, B = 0.9, 0.4

_STOPWORDS = frozenset(STOPWORDS_EN)
# A run of word characters possibly joined by . - / (versions, paths, slash lists, hyphenated names,
# dotted names, dates), or a command-line flag (-xy, --long-name) where a word starts: its dash is
# matched before what precedes it is looked at, as most places in a text hold no dash.
_TOKEN = re.compile(r"\w+(?:[./-]\w+)*|-(?<![\w./-]-)-?(?=[^\W\d_]{2})[\w-]*\w")
_WORD_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_CAMEL = re.compile(r"[a-z][A-Z]")
_JOINED = re.compile(r"[\d_.-]|[a-z][A-Z]")  # what makes a token more than a plain word
# What makes such a token an identifier, an exact term: a digit, an underscore or a dot inside it, or a camelCase
# step (E1042, 429, 2.3.1, max_retry_count, ConnectionPool, eu-west-1). Words joined by hyphens (mid-March,
# total-assets, pre-production) are indexed whole too, but are words: a distractor sharing one is no match.
_EXACT = re.compile(r"[\d_.]|[a-z][A-Z]")
_VERSION_PREFIX = re.compile(r"^v(?=\d)")
_NAME_GAP = re.compile(r"[ \t]+|'")  # what may separate the words of one name: Siobhan O'Neill
TITLE = "^"  # prefix of the index terms of a text's first line, its title
_local = threading.local()  # a Stemmer object must not be shared between threads


def _stem(words: list[str]) -> list[str]:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer.stemWords(words)


# Words a query may hold that its answer need not: stopwords, question words, pronouns, modal verbs.
_FILLER = (frozenset(STOPWORDS_EN_PLUS) | frozenset(_stem(list(STOPWORDS_EN_PLUS)))
           | {"would", "could", "might", "must", "shall"})


def _is_capitalised(token: str) -> bool:
    return all(part[:1].isupper() and not part.isupper() and part.isalpha() for part in token.split("-"))


class _Terms:
    """The terms of a text: identifiers (kept whole), other joined tokens kept whole (numbers, hyphenated
    words), plain words, and (with `names`) personal names."""

    def __init__(self, text: str, names: bool = False):
        self.identifiers: list[str] = []
        self.joined: list[str] = []
        self.words: list[str] = []
        self.names: list[str] = []
        self.joined_names: list[str] = []
        run: list[str] = []  # capitalised words in a row: two or more make a name
        end = 0
        for match in _TOKEN.finditer(text):
            token = match.group()
            if token.isalpha() and (token.islower() or _CAMEL.search(token) is None):  # most: a plain word
                word = token.lower()
                if len(word) > 1 and word not in _STOPWORDS:
                    self.words.append(word)
            else:
                self._add(token)
            if names:  # O'Neill: a capital letter before an apostrophe is part of a name
                capital = _is_capitalised(token) or (token.isupper() and len(token) == 1
                                                     and text.startswith("'", match.end()))
                if not (capital and run and _NAME_GAP.fullmatch(text, end, match.start())):
                    self._end_name(run)
                    run = []
                if capital:
                    run.append(token)
                end = match.end()
        self._end_name(run)

    def _add(self, token: str, exact: bool = False) -> None:
        """Add a token that is not a plain word; `exact` makes it an identifier whatever it looks like."""
        if token.startswith("-"):  # a flag is a term, and so is the name after its dashes
            self.identifiers.append(token.lower())
            token, exact = token.lstrip("-"), True
        if "/" in token:  # a path or a list: each file name or code in it is a term of its own
            self.identifiers.append(_VERSION_PREFIX.sub("", token.lower()))
            for part in token.split("/"):
                if part:
                    self._add(part)
            return
        if _JOINED.search(token):
            whole = _VERSION_PREFIX.sub("", token.lower())
            (self.identifiers if exact or _EXACT.search(token) else self.joined).append(whole)
            self.words.extend(_keep(_WORD_PART.findall(token)))
        else:
            self.words.extend(_keep([token]))

    def _end_name(self, run: list[str]) -> None:
        run = [token for token in run if token.lower() not in _FILLER]  # "Would Caroline" is one word of a name
        if len(run) > 1 or (run and "-" in run[0]):
            self.joined_names.extend(token.lower() for token in run if "-" in token)  # Wen-Li, indexed whole
            self.names.extend(_keep(part for token in run for part in token.split("-")))


def _keep(parts: Iterable[str]) -> list[str]:
    return [w for w in (p.lower() for p in parts) if len(w) > 1 and w.isalpha() and w not in _STOPWORDS]


def tokenize(text: str) -> list[str]:
    """Index terms of `text`: stemmed lower-case words, stopwords dropped, identifiers kept whole.

    An identifier (E1234, 2.3.1, #482, max_retry_count, ConnectionPool, summary-latest.json, --dry-run)
    or words joined by hyphens (Wen-Li, mid-March) yield themselves, lower-cased and unstemmed (a leading
    `v` of a version dropped), plus their stemmed word parts, so both `max_retry_count` and "retry count"
    find it. A path or slash list also yields each of its parts (/var/log/x.json gives x.json;
    E7301/E7302 gives e7301 and e7302).
    """
    terms = _Terms(text)
    return terms.identifiers + terms.joined + _stem(terms.words)


def document_terms(text: str) -> list[str]:
    """`tokenize(text)`, plus the terms of its first line (its title) again, prefixed with TITLE."""
    title = text.split("\n", 1)[0]
    return tokenize(text) + [TITLE + term for term in _distinct(tokenize(title))]


def exact_terms(query: str) -> list[str]:
    """The terms of `query` that must match exactly: its identifiers and the words of personal names.

    A name is two or more capitalised words in a row (Priya Raman, Siobhan O'Neill) or a capitalised
    hyphenated word (Wen-Li); a single capitalised word may just start a sentence, so it is not one, nor
    is a capitalised filler word before one ("Would Caroline").
    """
    terms = _Terms(query, names=True)
    return _distinct(terms.identifiers + terms.joined_names + _stem(terms.names))


def query_terms(query: str) -> list[str]:
    """The terms of `query` BM25 scores: its distinct terms less filler words ("what did", "how would"),
    unless it holds nothing else."""
    terms = _distinct(tokenize(query))
    return [term for term in terms if term not in _FILLER] or terms


def title_terms(query: str) -> list[str]:
    """The terms of `query` a title must hold to match it exactly: all but filler words."""
    return _distinct(term for term in tokenize(query) if term not in _FILLER)


def _distinct(terms: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(terms))


class KeywordIndex:
    """BM25 over (key, text) items with masked deletions and an overlay for additions.

    Not thread-safe: the owner serialises edits with searches (building a new index in another
    thread while this one serves is fine).
    """

    rebuild_fraction = 0.1
    rebuild_floor = 64  # changes a small index absorbs before a rebuild is worth it

    def __init__(self, base: bm25s.BM25 | None, keys: np.ndarray, alive: np.ndarray,
                 total_length: int, overlay: dict[int, list[str]]):
        self._bm25 = base
        self._keys = keys
        self._alive = alive
        self._order = np.argsort(keys, kind="stable")  # base positions by key: `_positions` bisects them
        self._sorted = keys[self._order]
        self._count = int(np.count_nonzero(alive))  # live base documents
        self._total_length = total_length
        self._doc_freq = np.diff(base.scores["indptr"]) if base is not None else np.zeros(0)
        self._overlay: dict[int, list[str]] = {}
        self._last_raw: tuple[tuple[int, ...], np.ndarray] | None = None
        # id(mask) -> (mask, its weights), for the WEIGHTS_KEPT masks used last (the most recent last)
        self._kept_weights: OrderedDict[int, tuple[Collection[int], np.ndarray]] = OrderedDict()
        self._postings: dict[str, dict[int, int]] = {}
        self._overlay_length = 0
        for key, terms in overlay.items():
            self._overlay_add(key, terms)

    @classmethod
    def build(cls, items: Iterable[tuple[int, str]]) -> KeywordIndex:
        """Index `(key, text)` items; keys are distinct unsigned 64-bit integers. Each text's terms are kept as
        term ids as it is read (`_TermIds`), so a build holds 4 bytes a term, not a list of strings per item."""
        keys, documents = array("Q"), _TermIds()
        for key, text in items:
            keys.append(key)
            documents.append(document_terms(text))
        key_array = np.array(keys, dtype=np.uint64)
        ordered = np.sort(key_array)  # (np.unique would load numpy.ma: 0.03 s of a search's start)
        if (ordered[1:] == ordered[:-1]).any():
            raise ValueError("keyword index items have duplicate keys")
        base = None
        if documents.terms:
            base = bm25s.BM25(k1=K1, b=B)
            base.index(Tokenized(ids=documents, vocab=documents.vocabulary), show_progress=False)
        return cls(base, key_array, np.ones(len(keys), dtype=np.float32), documents.terms, {})

    def __len__(self) -> int:
        return self._count + len(self._overlay)

    def __contains__(self, key: int) -> bool:
        return key in self._overlay or self._positions([key])[0] >= 0

    def _positions(self, keys: Iterable[int]) -> np.ndarray:
        """The base positions of `keys`, -1 for keys the base does not hold or holds removed."""
        keys = np.fromiter(keys, dtype=np.uint64)
        if not len(self._sorted) or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        positions = self._order[at]
        return np.where((self._sorted[at] == keys) & (self._alive[positions] != 0), positions, -1)

    @property
    def needs_rebuild(self) -> bool:
        """True once deletions and overlay together exceed `rebuild_fraction` of the base."""
        changes = len(self._keys) - self._count + len(self._overlay)
        return changes > max(self.rebuild_floor, self.rebuild_fraction * len(self._keys))

    def add(self, items: Iterable[tuple[int, str]]) -> None:
        """Add `(key, text)` items, replacing the text of keys already indexed."""
        for key, text in items:
            self.remove([key])
            self._overlay_add(int(key), document_terms(text))

    def remove(self, keys: Iterable[int]) -> None:
        """Forget `keys`; unknown keys are ignored."""
        self._kept_weights.clear()
        keys = list(keys)
        positions = self._positions(keys)
        positions = positions[positions >= 0]
        self._alive[positions] = 0.0
        self._count -= len(positions)
        for key in keys:
            terms = self._overlay.pop(key, None)
            if terms is not None:
                self._overlay_length -= len(terms)
                for term in set(terms):
                    posting = self._postings[term]
                    del posting[key]
                    if not posting:
                        del self._postings[term]

    def _overlay_add(self, key: int, terms: list[str]) -> None:
        self._overlay[key] = terms
        self._overlay_length += len(terms)
        for term, count in Counter(terms).items():
            self._postings.setdefault(term, {})[key] = count

    def search(self, query: str, k: int = 10,
               mask: Collection[int] | None = None) -> list[tuple[int, float]]:
        """The `k` best `(key, score)` pairs with a non-zero score, best first.

        `mask`, when given, holds the only keys that may be returned.
        """
        if k <= 0:
            return []
        # A set is used as given, so that the weights cached for it serve the caller's next query.
        allowed = mask if mask is None or isinstance(mask, (set, frozenset)) else set(mask)
        terms = query_terms(query)
        found: dict[int, float] = {}
        raw = self._raw_scores(terms)
        if raw is not None:
            scores = raw * self._weights(allowed)
            hits = np.flatnonzero(scores > 0)
            if len(hits) > k:
                hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
            found.update(zip(self._keys[hits].tolist(), scores[hits].tolist()))
        found.update((key, score) for key, score in self._overlay_scores(terms).items()
                     if allowed is None or key in allowed)
        return sorted(found.items(), key=lambda hit: (-hit[1], hit[0]))[:k]

    def scores(self, query: str, keys: Iterable[int], *, identifiers_only: bool = False) -> np.ndarray:
        """The BM25 score of `query` for each of `keys` (0 for keys not indexed).

        With `identifiers_only`, only the query's `exact_terms` count: the exact-match evidence.
        """
        terms = exact_terms(query) if identifiers_only else query_terms(query)
        overlay = self._overlay_scores(terms)
        raw = self._raw_scores(terms)
        keys = list(keys)
        positions = self._positions(keys)
        out = np.array([overlay.get(key, 0.0) for key in keys], dtype=np.float32)
        if raw is not None:
            based = positions >= 0
            out[based] = raw[positions[based]]
        return out

    def weight(self, query: str) -> float:
        """The sum of the idf of the query's terms, a term no item holds weighing most: an item of average
        length holding each term once scores `weight / (1 + K1)` (see `scores`)."""
        n_docs = len(self._keys) + len(self._overlay)
        total = 0.0
        for term in query_terms(query):
            df = self._base_doc_freq(term) + len(self._postings.get(term, ()))
            total += math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        return total

    def title_matches(self, query: str, keys: Iterable[int]) -> np.ndarray:
        """For each of `keys`, whether its title (first line) holds every one of the query's `title_terms`."""
        keys = list(keys)
        positions = self._positions(keys)
        found = np.ones(len(keys), dtype=bool)
        terms = title_terms(query)
        for term in terms:
            posting = self._postings.get(TITLE + term, {})
            in_base = np.isin(positions, self._documents_with(TITLE + term))
            found &= in_base | np.fromiter((key in posting for key in keys), dtype=bool, count=len(keys))
        return found & bool(terms)

    def _documents_with(self, term: str) -> np.ndarray:
        """Positions of the base documents that hold `term` (dead ones included)."""
        term_id = self._bm25.vocab_dict.get(term) if self._bm25 is not None else None
        if term_id is None or term_id >= len(self._doc_freq):
            return np.zeros(0, dtype=np.int64)
        start, stop = self._bm25.scores["indptr"][term_id:term_id + 2]
        return self._bm25.scores["indices"][start:stop]

    def _weights(self, allowed: set[int] | None) -> np.ndarray:
        if allowed is None:
            return self._alive
        kept = self._kept_weights.get(id(allowed))
        if kept is not None and kept[0] is allowed:  # the caller reuses its mask objects
            self._kept_weights.move_to_end(id(allowed))
            return kept[1]
        weights = np.zeros_like(self._alive)
        positions = self._positions(allowed)
        weights[positions[positions >= 0]] = 1.0
        self._kept_weights[id(allowed)] = (allowed, weights)
        if len(self._kept_weights) > WEIGHTS_KEPT:
            self._kept_weights.popitem(last=False)
        return weights

    def _raw_scores(self, terms: list[str]) -> np.ndarray | None:
        """The base index's BM25 score of `terms` for every document (None when it knows none of them)."""
        ids = tuple(self._bm25.get_tokens_ids(terms)) if self._bm25 is not None else ()
        if not ids:
            return None
        # The base index never changes, so a query's raw scores serve its search and its rescoring.
        if self._last_raw is None or self._last_raw[0] != ids:
            self._last_raw = (ids, self._bm25.get_scores_from_ids(list(ids)))
        return self._last_raw[1]

    def _overlay_scores(self, terms: list[str]) -> dict[int, float]:
        if not self._overlay:
            return {}
        # bm25s's "lucene" variant, with the statistics of base and overlay together.
        n_docs = len(self._keys) + len(self._overlay)
        avg_length = max((self._total_length + self._overlay_length) / n_docs, 1e-9)
        scores: dict[int, float] = {}
        for term in terms:
            posting = self._postings.get(term)
            if not posting:
                continue
            df = len(posting) + self._base_doc_freq(term)
            idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            for key, tf in posting.items():
                length = len(self._overlay[key])
                tfc = tf / (tf + K1 * (1 - B + B * length / avg_length))
                scores[key] = scores.get(key, 0.0) + idf * tfc
        return scores

    def _base_doc_freq(self, term: str) -> int:
        if self._bm25 is None:
            return 0
        term_id = self._bm25.vocab_dict.get(term)
        return int(self._doc_freq[term_id]) if term_id is not None and term_id < len(self._doc_freq) else 0

    def save(self, directory: str | os.PathLike) -> None:
        """Write the index to `directory`, never leaving a half-written one there."""
        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            if self._bm25 is not None:
                vocabulary, self._bm25.vocab_dict = self._bm25.vocab_dict, {}  # bm25s would write it as JSON
                try:
                    self._bm25.save(staging / "bm25", show_progress=False)
                finally:
                    self._bm25.vocab_dict = vocabulary
                (staging / "bm25" / "vocab.index.json").unlink()
                Vocabulary.write(vocabulary, staging / "bm25")
            np.save(staging / "keys.npy", self._keys)
            np.save(staging / "alive.npy", self._alive)
            meta = {"format": FORMAT, "total_length": self._total_length,
                    "overlay": {str(key): terms for key, terms in self._overlay.items()}}
            (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            _replace_directory(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    @classmethod
    def load(cls, directory: str | os.PathLike) -> KeywordIndex:
        """Read an index written by `save` (raises FormatError if missing or unreadable)."""
        source = Path(directory)
        if not (source / "meta.json").is_file():
            raise FormatError(f"{source}: keyword index is missing")
        try:
            meta = json.loads((source / "meta.json").read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT:
                raise FormatError(f"{source}: keyword index format {meta.get('format')!r}, "
                                  f"this version reads {FORMAT}")
            keys = np.load(source / "keys.npy")
            alive = np.load(source / "alive.npy")
            base = None
            if (source / "bm25").is_dir():
                base = bm25s.BM25.load(source / "bm25", mmap=True, load_vocab=False, show_progress=False)  # mapped
                base.vocab_dict = Vocabulary.load(source / "bm25")
            overlay = {int(key): terms for key, terms in meta["overlay"].items()}
            if keys.shape != alive.shape or (base is not None and base.scores["num_docs"] != len(keys)):
                raise FormatError(f"{source}: keyword index files disagree on the number of documents")
            return cls(base, keys, alive, int(meta["total_length"]), overlay)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"{source}: cannot read keyword index: {exc}") from exc


class _TermIds(Sequence):
    """The documents of a build as lists of term ids, packed in one array as they are added: bm25s reads the
    documents three times, one list at a time, and `vocabulary` (term -> id, in order of first use) is its own."""

    def __init__(self):
        self.vocabulary: dict[str, int] = {}
        self._ids = array("I")
        self._ends = array("Q")

    @property
    def terms(self) -> int:
        """How many terms every document holds together."""
        return len(self._ids)

    def append(self, terms: list[str]) -> None:
        vocabulary = self.vocabulary
        self._ids.extend([vocabulary.setdefault(term, len(vocabulary)) for term in terms])
        self._ends.append(len(self._ids))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, n: int) -> list[int]:
        return self._ids[self._ends[n - 1] if n else 0:self._ends[n]].tolist()


class Vocabulary(Mapping):
    """bm25s's vocabulary (term -> term id) as saved here: the terms' UTF-8 bytes in byte order in one array,
    memory-mapped, each term found by bisection. Nothing is read as it loads: as JSON, the 200,000 terms of
    100,000 generated headlines took 0.31 s to parse into a dict, and they grow with the items."""

    FILES = ("terms.npy", "term_ends.npy", "term_ids.npy")

    def __init__(self, terms: np.ndarray, ends: np.ndarray, ids: np.ndarray):
        self._terms, self._ends, self._ids = terms, ends, ids

    @classmethod
    def write(cls, vocabulary: Mapping[str, int], folder: Path) -> None:
        if isinstance(vocabulary, Vocabulary):
            arrays = (vocabulary._terms, vocabulary._ends, vocabulary._ids)
        else:
            encoded = [term.encode("utf-8", "surrogatepass") for term in vocabulary]
            order = sorted(range(len(encoded)), key=encoded.__getitem__)
            ordered = [encoded[n] for n in order]
            arrays = (np.frombuffer(b"".join(ordered), dtype=np.uint8),
                      np.cumsum(np.fromiter(map(len, ordered), dtype=np.int64, count=len(ordered))),
                      np.fromiter(vocabulary.values(), dtype=np.uint32, count=len(order))[order])
        for name, array in zip(cls.FILES, arrays):
            np.save(folder / name, array)

    @classmethod
    def load(cls, folder: Path) -> Vocabulary:
        terms, ends, ids = (np.load(folder / name, mmap_mode="r") for name in cls.FILES)
        if len(ends) != len(ids) or (len(ends) and ends[-1] != len(terms)):
            raise ValueError(f"{folder}: the vocabulary's files disagree")
        return cls(terms, ends, ids)

    def _term(self, n: int) -> bytes:
        return self._terms[int(self._ends[n - 1]) if n else 0:int(self._ends[n])].tobytes()

    def get(self, term: str, default=None):
        wanted = term.encode("utf-8", "surrogatepass")
        low, high = 0, len(self._ids)
        while low < high:
            middle = (low + high) // 2
            if self._term(middle) < wanted:
                low = middle + 1
            else:
                high = middle
        return int(self._ids[low]) if low < len(self._ids) and self._term(low) == wanted else default

    def __getitem__(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return found

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return (self._term(n).decode("utf-8", "surrogatepass") for n in range(len(self._ids)))


def _replace_directory(staging: Path, target: Path) -> None:
    # A directory cannot be renamed over a non-empty one: move the old one aside first.
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
