"""Summarizers fold evicted turns into a rolling summary; any object with `summarize` will do."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import Stemmer

from .turns import Turn

__all__ = ["ExtractiveSummarizer", "Summarizer", "SummarizerCancelled", "SummarizerTimeout", "TimedSummarizer"]


@runtime_checkable
class Summarizer(Protocol):
    """Fold `turns` into `previous_summary`; raise on failure (the health state machine handles it)."""

    def summarize(self, previous_summary: str, turns: Sequence[Turn]) -> str:
        """Return the new summary."""


class SummarizerTimeout(Exception):
    """A summarizer did not answer in time (the health state machine counts it as a failure)."""


class SummarizerCancelled(Exception):
    """The memory was closed while a summarizer was working; its answer is no longer wanted."""


class TimedSummarizer:
    """Calls a summarizer on a worker thread, waiting at most `timeout` seconds; `cancel()` ends every wait.

    Python cannot stop a thread: a call given up on runs on in its daemon thread and its answer is dropped.
    """

    def __init__(self, summarizer: Summarizer, timeout: float):
        self.summarizer = summarizer
        self.timeout = timeout
        self._lock = threading.Lock()
        self._waits: set[threading.Event] = set()
        self._cancelled = False

    def summarize(self, previous_summary: str, turns: Sequence[Turn]) -> str:
        """The summarizer's answer; raise what it raised, SummarizerTimeout, or SummarizerCancelled."""
        done, outcome = threading.Event(), []

        def run() -> None:
            try:
                outcome.append((True, self.summarizer.summarize(previous_summary, turns)))
            except BaseException as exc:  # handed to the waiting caller, which decides
                outcome.append((False, exc))
            finally:
                done.set()

        with self._lock:
            if self._cancelled:
                raise SummarizerCancelled("the memory is closed")
            self._waits.add(done)
        try:
            threading.Thread(target=run, name="memory-summarizer", daemon=True).start()
            done.wait(self.timeout)
        finally:
            with self._lock:
                self._waits.discard(done)
        if self._cancelled:
            raise SummarizerCancelled("the memory was closed while the summarizer was working")
        if not outcome:
            raise SummarizerTimeout(f"no answer within {self.timeout} s")
        answered, value = outcome[0]
        if not answered:
            raise value
        return value

    def cancel(self) -> None:
        """Give up on every call in flight and refuse later ones."""
        with self._lock:
            self._cancelled = True
            for done in self._waits:
                done.set()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+")
# Function words carry no topic; a short list here avoids importing a search library for it.
_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers him
his how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours
out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you
your yours
""".split())


class ExtractiveSummarizer:
    """Keep the sentences richest in the conversation's frequent terms; no model, deterministic.

    Candidates are the previous summary's sentences and every sentence of the new
    turns; each scores the mean corpus frequency of its stemmed content words, and the
    best `max_sentences` are kept in their original order, so the summary stays
    bounded however many batches it folds.
    """

    def __init__(self, max_sentences: int = 4, language: str = "english"):
        if max_sentences < 1:
            raise ValueError("max_sentences must be at least 1")
        self.max_sentences = max_sentences
        self._stemmer = Stemmer.Stemmer(language)

    def summarize(self, previous_summary: str, turns: Sequence[Turn]) -> str:
        """Return the top sentences of the previous summary and the turns, in order."""
        texts = [previous_summary] + [text for t in turns for text in (t.user_message, t.assistant_response)]
        sentences = [s.strip() for text in texts for s in _SENTENCE_END.split(text) if s.strip()]
        terms = [self._terms(s) for s in sentences]
        frequency = Counter(term for sentence_terms in terms for term in sentence_terms)

        def score(i: int) -> float:
            return sum(frequency[t] for t in terms[i]) / len(terms[i]) if terms[i] else 0.0

        best = sorted(range(len(sentences)), key=lambda i: (-score(i), i))[: self.max_sentences]
        return " ".join(sentences[i] for i in sorted(best))

    def _terms(self, sentence: str) -> list[str]:
        words = [w for w in _WORD.findall(sentence.lower()) if w not in _STOPWORDS and len(w) > 1]
        return self._stemmer.stemWords(words)
