"""The extractive summarizer keeps the sentences about what the conversation is about, in order, bounded."""

from cortex.memory.conversation import ExtractiveSummarizer, Summarizer, Turn

TURNS = [
    Turn("How do I grow the LMDB map size? The weather is nice today.",
         "Grow the LMDB map size when LMDB reports a full map. My cat likes boxes.", timestamp_ns=1),
    Turn("Does the map size grow on its own? Lunch was great.",
         "The map size grows when the LMDB map is full. Trains run late on Mondays.", timestamp_ns=2),
]
FILLER = ("weather", "cat", "Lunch", "Trains")


def test_it_is_a_summarizer():
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_keeps_topic_sentences_in_their_order():
    summary = ExtractiveSummarizer(max_sentences=2).summarize("", TURNS)
    sentences = [s for s in summary.replace("?", "?|").replace(".", ".|").split("|") if s.strip()]
    assert len(sentences) == 2 and all("map size" in s for s in sentences)
    assert not any(word in summary for word in FILLER)
    source = " ".join(t.user_message + " " + t.assistant_response for t in TURNS)
    assert [source.index(s.strip()) for s in sentences] == sorted(source.index(s.strip()) for s in sentences)


def test_folding_keeps_the_summary_bounded_and_drops_stale_filler():
    summarizer = ExtractiveSummarizer(max_sentences=3)
    summary = summarizer.summarize("Someone mentioned a parade.", TURNS[:1])
    for _ in range(5):
        summary = summarizer.summarize(summary, TURNS[1:])
    assert summary.count("?") + summary.count(".") <= 3 and "parade" not in summary
    assert "map size" in summary


def test_nothing_to_fold_returns_the_previous_summary():
    assert ExtractiveSummarizer().summarize("", []) == ""
    assert ExtractiveSummarizer().summarize("Kept as is.", []) == "Kept as is."


def test_is_deterministic():
    assert ExtractiveSummarizer().summarize("", TURNS) == ExtractiveSummarizer().summarize("", TURNS)
