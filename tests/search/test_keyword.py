import json
from pathlib import Path

import bm25s
import numpy as np
import pytest

from cortex.errors import FormatError
from cortex.search import keyword
from cortex.search.keyword import (TITLE, KeywordIndex, Vocabulary, document_terms, exact_terms, query_terms,
                                   title_terms, tokenize)

DOCS = {
    1: "Error E1234 from the upload service means the signed URL expired.",
    2: "Error E1243 from the upload service means the file is too large.",
    3: "Version 2.3.1 of the SDK fixed the memory leak in the streaming client.",
    4: "Version 2.3.10 of the SDK fixed a race in the connection pool.",
    5: "Issue #482: the CSV export drops rows with unicode names.",
    6: "Issue #4821: the PDF export misaligns tables.",
    7: "The setting max_retry_count caps retries of outbound webhooks.",
    8: "The setting max_retry_delay spaces retries of outbound webhooks.",
    9: "The user prefers dark mode in every application.",
    10: "Deployments happen every Friday afternoon.",
}


@pytest.fixture
def index():
    return KeywordIndex.build(DOCS.items())


def top(index, query, k=1, **kwargs):
    return [key for key, _ in index.search(query, k, **kwargs)]


def test_tokenizer_keeps_identifiers_whole():
    terms = tokenize("Error E1234 in v2.3.1, see #482; max_retry_count in ConnectionPool (src/app.py).")
    for identifier in ("e1234", "2.3.1", "482", "max_retry_count", "connectionpool", "src/app.py"):
        assert identifier in terms
    assert {"retri", "count", "connect", "pool", "error"} <= set(terms)  # stemmed word parts
    assert "in" not in terms and "see" in terms  # English stopwords dropped


def test_tokenizer_stems_and_normalises_words():
    assert tokenize("The deployments were running") == ["deploy", "were", "run"]
    assert tokenize("pre-production servers") == ["pre-production", "pre", "product", "server"]
    assert tokenize("version 2.3.1.") == tokenize("Version v2.3.1") == ["2.3.1", "version"]
    assert exact_terms("Fix E1234 and #482 in utils.py today") == ["e1234", "482", "utils.py"]
    assert exact_terms("a plain sentence") == []


@pytest.mark.parametrize("text, exact", [
    ("It writes /var/log/x/summary-latest.json", ["var/log/x/summary-latest.json", "summary-latest.json"]),
    ("Errors E7301/E7302 mean a declined card", ["e7301/e7302", "e7301", "e7302"]),
    ("kubectl drain --delete-emptydir-data", ["--delete-emptydir-data", "delete-emptydir-data"]),
    ("rm -rf the folder", ["-rf"]),
    ("What did Wen-Li Zhou approve?", ["wen-li", "wen", "li", "zhou"]),
    ("Ask Siobhan O'Neill", ["ask", "siobhan", "neill"]),
    ("Did 2.10.0 remove it?", ["2.10.0"]),
])
def test_paths_lists_flags_and_names_are_exact_terms(text, exact):
    assert exact_terms(text) == exact
    assert set(exact) <= set(tokenize(text))  # documents index what queries look for


def test_what_is_not_an_exact_term():
    assert exact_terms("Deployments happen on Friday, says Maria.") == []  # one capitalised word is no name
    assert exact_terms("Would Caroline pursue writing?") == []  # nor a capitalised question word before it
    assert exact_terms("Does the Python build take -5 - 3 days?") == ["5", "3"]  # numbers, not flags
    assert exact_terms("The User Likes Dark Mode") == ["user", "like", "dark", "mode"]  # a title-cased query


def test_hyphenated_words_are_indexed_whole_but_are_not_exact():
    text = "the mid-March report of total-assets, and what does wen-li zhou do"
    assert exact_terms(text) == []
    assert {"mid-march", "total-assets", "wen-li"} <= set(tokenize(text))
    assert exact_terms("gpt-4o-mini in eu-central-1 fixed #482") == ["gpt-4o-mini", "eu-central-1", "482"]


def test_a_query_is_scored_by_its_words_less_its_filler():
    assert query_terms("What did Caroline research?") == ["carolin", "research"]
    assert query_terms("what is it") == ["what"]  # nothing else: the filler is all there is


def test_titles_are_indexed_under_their_own_prefix():
    assert title_terms("How do I rename a git branch?") == ["renam", "git", "branch"]
    assert document_terms("Export to HTML\nwrites pages") == [
        "export", "html", "write", "page", TITLE + "export", TITLE + "html"]


@pytest.mark.parametrize("query, expected", [
    ("What does E1234 mean?", 1), ("e1243", 2), ("bug fixed in 2.3.1", 3), ("2.3.10", 4),
    ("What was #482 about?", 5), ("issue 4821", 6), ("max_retry_count", 7),
    ("max_retry_delay default", 8), ("dark mode", 9),
])
def test_identifiers_beat_near_duplicates(index, query, expected):
    assert top(index, query) == [expected]


def test_search_returns_only_matches_best_first(index):
    hits = index.search("upload service error", 5)
    assert [key for key, _ in hits][:2] in ([1, 2], [2, 1])
    assert len(hits) == 2 and all(score > 0 for _, score in hits)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert index.search("zebra quantum", 5) == []
    assert index.search("the of and", 5) == []
    assert len(index.search("retries", 1)) == 1


def test_mask_restricts_results(index):
    assert top(index, "export", 5, mask={6}) == [6]
    assert top(index, "export", 5, mask=set()) == []
    assert set(top(index, "export", 5)) == {5, 6}


def test_a_mask_reused_across_queries_sees_removals_and_additions(index):
    mask = {5, 6, 11}
    assert set(top(index, "export", 5, mask=mask)) == {5, 6}
    index.remove([6])
    index.add([(11, "The export of invoices runs nightly.")])
    assert set(top(index, "export", 5, mask=mask)) == {5, 11}


def test_alternating_masks_each_keep_their_weights_until_a_change(index):
    first, second = {5}, {6}
    for _ in range(3):  # two agents' filters taking turns
        assert top(index, "export", 5, mask=first) == [5] and top(index, "export", 5, mask=second) == [6]
    assert {id(first), id(second)} <= index._kept_weights.keys()
    index.remove([5])
    assert top(index, "export", 5, mask=first) == [] and top(index, "export", 5, mask=second) == [6]
    many = [{key} for key in range(20)]
    for mask in many:
        top(index, "export", 5, mask=mask)
    assert len(index._kept_weights) == keyword.WEIGHTS_KEPT and top(index, "export", 5, mask=second) == [6]


def test_removal_and_edit_are_seen_by_the_next_search(index):
    index.remove([1, 999])
    assert top(index, "E1234") == [] and 1 not in index
    index.add([(11, "Runbook: restart the ingest worker with systemctl restart ingest")])
    assert top(index, "restart ingest") == [11]
    index.add([(9, "The user prefers light mode on the phone.")])
    assert top(index, "dark") == [] and top(index, "light mode") == [9]
    index.remove([11])
    assert top(index, "restart ingest") == [] and len(index) == len(DOCS) - 1
    assert top(index, "light mode", mask={9}) == [9] and top(index, "light mode", mask={3}) == []


def test_overlay_scores_like_a_rebuilt_index():
    docs = json.loads((Path(__file__).parents[1] / "data" / "keyword_eval.json").read_text())
    texts = [pair["memory"] for pair in docs["pairs"]] + docs["distractors"]
    queries = [pair["query"] for pair in docs["pairs"]]
    items = list(enumerate(texts))
    rebuilt = KeywordIndex.build(items)
    edited = KeywordIndex.build(items[:-10])
    edited.add(items[-10:])
    edited.add(items[:3])  # re-adding moves these into the overlay too
    for query in queries:
        expected, got = rebuilt.search(query, 3), edited.search(query, 3)
        assert got[0][0] == expected[0][0]
        assert got[0][1] == pytest.approx(expected[0][1], rel=0.1)


def test_a_build_from_term_ids_scores_as_bm25s_does_from_the_terms():
    docs = json.loads((Path(__file__).parents[1] / "data" / "keyword_eval.json").read_text())
    items = list(enumerate([pair["memory"] for pair in docs["pairs"]] + docs["distractors"]))
    built = KeywordIndex.build(items)
    terms = [document_terms(text) for _, text in items]
    reference = bm25s.BM25(k1=keyword.K1, b=keyword.B)
    reference.index(terms, show_progress=False)
    assert built._total_length == sum(map(len, terms))
    for pair in docs["pairs"]:
        wanted = query_terms(pair["query"])
        assert np.array_equal(built._bm25.get_scores(wanted), reference.get_scores(wanted))


def test_scores_for_given_keys(index):
    index.add([(12, "Error E1234 also appears in the download service.")])
    scores = index.scores("E1234 upload", [1, 12, 9, 404])
    hits = dict(index.search("E1234 upload", 10))
    assert scores[0] == pytest.approx(hits[1]) and scores[1] == pytest.approx(hits[12])
    assert list(scores[2:]) == [0.0, 0.0]
    exact = index.scores("E1234 upload", [1, 2], identifiers_only=True)
    assert exact[0] > 0 and exact[1] == 0


EXACT_DOCS = {
    1: "The report job writes /var/log/x/summary-latest.json every night.",
    2: "The report job writes /var/log/x/summary-previous.json every night.",
    3: "Errors E7301/E7302 mean the issuer declined the card.",
    4: "Errors E7310/E7311 mean the gateway timed out.",
    5: "kubectl drain needs --delete-emptydir-data for emptyDir volumes.",
    6: "kubectl drain needs --delete-local-data for emptyDir volumes.",
    7: "Wen-Li Zhou approved the platform budget.",
    8: "Li Zhou approved the vendor contract.",
    9: "Export to HTML\nThe exporter writes standalone pages.",
    10: "Publishing notes as a website\nExport every note to HTML pages you can host.",
}


@pytest.mark.parametrize("query, expected, twin", [
    ("Which job writes summary-latest.json?", 1, 2), ("what does E7302 mean", 3, 4), ("E7311", 4, 3),
    ("When is --delete-emptydir-data needed?", 5, 6), ("What did Wen-Li Zhou approve?", 7, 8),
])
def test_exact_evidence_goes_to_the_item_with_the_exact_term(query, expected, twin):
    index = KeywordIndex.build(EXACT_DOCS.items())
    exact = dict(zip(EXACT_DOCS, index.scores(query, EXACT_DOCS, identifiers_only=True)))
    assert max(exact, key=exact.get) == expected and exact[twin] < exact[expected]


def test_title_matches_need_every_query_word_in_the_title():
    index = KeywordIndex.build(EXACT_DOCS.items())
    keys = list(EXACT_DOCS)
    assert [key for key, hit in zip(keys, index.title_matches("How do I export to HTML?", keys)) if hit] == [9]
    assert not index.title_matches("export to HTML tables", keys).any()
    assert not index.title_matches("how do I", keys).any()  # filler alone matches nothing
    assert list(index.title_matches("standalone pages", [9, 404])) == [False, False]  # 9 has them in its body


def test_title_matches_follow_edits_and_survive_saving(tmp_path):
    index = KeywordIndex.build(EXACT_DOCS.items())
    index.add([(11, "Export to HTML with MathJax\nFormulas render in the browser.")])
    index.remove([9])
    assert list(index.title_matches("export to html", [9, 10, 11])) == [False, False, True]
    index.save(tmp_path / "kw")
    loaded = KeywordIndex.load(tmp_path / "kw")
    assert list(loaded.title_matches("export to html", [9, 10, 11])) == [False, False, True]


def test_needs_rebuild_after_many_changes():
    index = KeywordIndex.build((key, f"note number {key}") for key in range(1000))
    assert not index.needs_rebuild
    index.remove(range(60))
    assert not index.needs_rebuild
    index.add((key, f"new note {key}") for key in range(2000, 2050))
    assert index.needs_rebuild


def test_empty_index_grows_through_the_overlay():
    index = KeywordIndex.build([])
    assert index.search("anything", 3) == [] and len(index) == 0
    index.add([(1, "first memory about E1234"), (2, "second memory")])
    assert top(index, "E1234") == [1]
    assert KeywordIndex.build([(5, "the and of")]).search("the", 1) == []


def test_keys_in_any_order_and_of_all_64_bits_are_found_removed_and_scored():
    keys = [2**64 - 1, 7, 2**63 + 5, 0, 12345]  # not in order; past int64
    index = KeywordIndex.build(zip(keys, ["alpha one", "beta two", "gamma three", "delta four", "alpha five"]))
    assert all(key in index for key in keys) and 8 not in index and len(index) == 5
    found = dict(index.search("alpha", 5))
    assert found == {key: pytest.approx(float(index.scores("alpha", [key])[0])) for key in (2**64 - 1, 12345)}
    index.remove([2**64 - 1, 8, 0])
    assert 2**64 - 1 not in index and 0 not in index and len(index) == 3
    assert index.scores("alpha gamma", [2**64 - 1, 2**63 + 5, 12345, 99]).tolist() == [
        0.0, pytest.approx(index.search("gamma", 1)[0][1]), pytest.approx(index.search("alpha", 1)[0][1]), 0.0]
    assert index.search("alpha", 5, mask={2**64 - 1, 12345}) == index.search("alpha", 1)
    index.add([(0, "delta again")])
    assert 0 in index and len(index) == 4 and index.search("delta", 1)[0][0] == 0


def test_duplicate_keys_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        KeywordIndex.build([(1, "a b"), (1, "c d")])


def test_save_and_load_keep_edits(index, tmp_path):
    index.remove([2])
    index.add([(20, "Error E9999 from the billing service")])
    index.save(tmp_path / "kw")
    loaded = KeywordIndex.load(tmp_path / "kw")
    for query in ("E1234", "E1243", "E9999 billing", "export", "2.3.1"):
        got, expected = loaded.search(query, 3), index.search(query, 3)
        assert [key for key, _ in got] == [key for key, _ in expected]
        assert [score for _, score in got] == pytest.approx([score for _, score in expected])
    assert len(loaded) == len(index) and 2 not in loaded and 20 in loaded
    loaded.add([(21, "fresh after load")])
    assert top(loaded, "fresh") == [21]


def test_save_replaces_the_previous_index(index, tmp_path):
    index.save(tmp_path / "kw")
    KeywordIndex.build([(1, "something else entirely")]).save(tmp_path / "kw")
    assert KeywordIndex.load(tmp_path / "kw").search("E1234", 1) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kw"]


def test_a_saved_vocabulary_finds_every_term_and_no_other(tmp_path):
    terms = {"a": 3, "ab": 0, "abc": 5, "b": 1, "é": 2, "ü-1.2": 4, "^x": 6, "z\udcff": 7}  # prefixes, accents, a lone surrogate
    Vocabulary.write(terms, tmp_path)
    loaded = Vocabulary.load(tmp_path)
    assert dict(loaded) == terms and len(loaded) == len(terms)
    assert [loaded.get(t) for t in ("", "aa", "abcd", "c", "e", "z")] == [None] * 6 and "aa" not in loaded
    (tmp_path / "again").mkdir()
    Vocabulary.write(loaded, tmp_path / "again")
    assert dict(Vocabulary.load(tmp_path / "again")) == terms
    Vocabulary.write({}, tmp_path / "again")
    assert dict(Vocabulary.load(tmp_path / "again")) == {}


def test_an_index_saved_twice_searches_as_built(index, tmp_path):
    index.save(tmp_path / "kw")
    KeywordIndex.load(tmp_path / "kw").save(tmp_path / "kw2")  # its vocabulary as loaded, written again
    loaded = KeywordIndex.load(tmp_path / "kw2")
    for query in ("E1234", "upload service", "2.3.10", "max_retry_delay", "dark mode", "nothing like it"):
        assert loaded.search(query, 3) == index.search(query, 3)
    assert not (tmp_path / "kw2" / "bm25" / "vocab.index.json").exists()  # bm25s's JSON of it is not kept


def test_unreadable_index_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match="missing"):
        KeywordIndex.load(tmp_path / "missing")
    KeywordIndex.build(DOCS.items()).save(tmp_path / "kw")
    (tmp_path / "kw" / "meta.json").write_text("{not json")
    with pytest.raises(FormatError, match="kw"):
        KeywordIndex.load(tmp_path / "kw")
    KeywordIndex.build(DOCS.items()).save(tmp_path / "kw")
    ends = tmp_path / "kw" / "bm25" / "term_ends.npy"
    ends.write_bytes(ends.read_bytes()[:-8])  # a term's end cut off
    with pytest.raises(FormatError, match="kw"):
        KeywordIndex.load(tmp_path / "kw")
