"""Reading definitions costs time linear in their size, whatever is wrong with them, and is capped.

Reports list the first problems and count the rest; a broken definition never stops search.
"""

import subprocess
import sys
import time
import warnings
from contextlib import suppress
from pathlib import Path

import hy
import pytest
from hy.models import Sequence

from cortex.cli import main
from cortex.dsl import (
    Definitions,
    DslError,
    Provider,
    Registry,
    WebhookDefinition,
    convert_brace_syntax,
    extract_from_org,
    load_definitions,
    parse_definitions,
)
from cortex.dsl.diagnostics import CHECKED, SHOWN, Problems
from cortex.dsl.reader import MAX_DEPTH, MAX_SIZE, SourceFile, read_forms
from cortex.errors import UserError

from tests.conftest import cpu_seconds


def unknown_keys(count: int) -> str:
    """One line: a memory with `count` keys it does not know."""
    return "(defmemory m " + " ".join(f":k{i} 1" for i in range(count)) + ")\n"


def failure(source: str, filename: str = "defs.hy") -> DslError:
    """The error reading `source` raises."""
    with pytest.raises(DslError) as caught:
        parse_definitions(source, filename)
    return caught.value


def dsl_seconds(action, *args) -> float:
    """CPU time spent on `action(*args)`; a DslError ends it."""

    def run():
        with suppress(DslError):
            action(*args)

    return cpu_seconds(run)


def growth(action, make, size: int, factor: int = 3) -> float:
    """How much longer `action` takes on `make(factor * size)` than on `make(size)`: `factor` when linear."""
    small, large = make(size), make(factor * size)
    dsl_seconds(action, make(size // 10))  # warm up: first calls import and fill caches
    return min(dsl_seconds(action, large) for _ in range(2)) / min(dsl_seconds(action, small) for _ in range(2))


def test_ten_thousand_unknown_keys_on_one_line_give_a_short_report_fast_and_in_linear_time():
    small, large = unknown_keys(10_000), unknown_keys(20_000)
    failure(unknown_keys(100))  # warm up: imports and first calls are not what is measured
    small_time, large_time = dsl_seconds(parse_definitions, small), dsl_seconds(parse_definitions, large)
    assert large_time < 3 * small_time, (small_time, large_time)  # 4 times if quadratic (how fast: bench/, not here)
    error = failure(small)
    assert len(error.diagnostics) == SHOWN and error.more == 10_000 - SHOWN
    report = str(error).splitlines()
    assert report[0] == "defs.hy:1:14: unknown keyword :k0 in defmemory m"
    assert report[-1] == f"and {10_000 - SHOWN} more problems"
    assert len(report) == 3 * SHOWN + 1 and max(map(len, report)) < 200


def test_a_problem_on_a_long_line_shows_the_part_of_the_line_around_it():
    error = failure('(defmemory m :path "' + "x" * 50_000 + '" :stor org)')
    (diagnostic,) = error.diagnostics
    assert (diagnostic.line, diagnostic.column) == (1, 50_023)
    located, line, caret = str(error).splitlines()
    assert located == "defs.hy:1:50023: unknown keyword :stor in defmemory m; did you mean :store?"
    assert line.startswith("...xxx") and line.endswith('" :stor org)') and len(line) < 120
    assert line[len(caret) - 1 :].startswith(":stor") and caret.strip() == "^"


def test_hy_is_given_each_character_once_however_many_forms_are_broken(monkeypatch):
    source = "(defmemory fine)\n" + "(defmemory m :path\n" * 500 + '(defmemory last :path "x")\n'
    given = []
    read_many = hy.read_many
    monkeypatch.setattr(hy, "read_many", lambda text, **kw: given.append(len(text)) or read_many(text, **kw))
    error = failure(source)
    assert error.diagnostics[0].message == "this '(' is not closed before the next form at line 3"
    assert error.more == 500 - SHOWN
    assert sum(given) <= len(source)


def test_forms_read_one_by_one_keep_the_positions_hy_gives_the_whole_file():
    text = ('(defmemory a\n  :search {:vector-weight 0.7\n    :keyword-weight 0.3})  (defwebhook b :path "/b"\n'
            '  :provider custom :header "X" :secret #[[s\n]] :algorithms ["RS256" RS384])\n'
            "   '(x y) `(c ~d) #(1 2) {:k [1\n 2]}")

    def positions(forms):
        found, todo = [], list(reversed(list(forms)))
        while todo:
            model = todo.pop()
            found.append((model, model.start_line, model.start_column, model.end_line, model.end_column))
            if isinstance(model, Sequence):
                todo.extend(reversed(list(model)))
        return found

    problems = Problems()
    assert positions(read_forms(SourceFile("a.hy", text), problems)) == positions(hy.read_many(text))
    assert not problems


@pytest.mark.parametrize("source", ["(" * 100_000, "[{" * 50_000, "'" * 100_000 + "x",
                                    "(defmemory m :path " + "(" * 300 + ")" * 300 + ")"],
                         ids=["open parentheses", "brackets", "quote marks", "deep but closed"])
def test_forms_nested_past_the_limit_are_a_clear_error_not_a_crash(source):
    error = failure(source)
    (diagnostic,) = error.diagnostics
    assert diagnostic.message == f"forms nest more than {MAX_DEPTH} deep here"
    assert len(str(error)) < 400


def test_forms_nested_to_the_limit_are_read():
    error = failure("(defmemory m :path " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + ")")
    assert error.diagnostics[0].message.startswith(":path takes a string, found list [[[[")


def test_a_deeply_nested_brace_block_is_a_clear_error_not_a_crash():
    with pytest.raises(DslError, match=f"values nest more than {MAX_DEPTH} deep here"):
        convert_brace_syntax("memory m { path " + "[" * 10_000 + "]" * 10_000 + " }")


def test_numbers_of_thousands_of_digits_are_problems_not_crashes():
    messages = [d.message for d in failure(
        "(defmemory a :search {:vector-weight 1" + "0" * 400 + "})\n"
        '(defmemory b :retention "' + "9" * 5000 + 'd")\n'
        '(defmemory c :retention "' + "9" * 400 + 'd")\n').diagnostics]
    assert messages == [f":vector-weight must be between 0 and 1, found 1{'0' * 36}...",
                        f"bad duration '{'9' * 37}...': longer than 1000 years: write at most 1000y",
                        f"bad duration '{'9' * 37}...': longer than 1000 years: write at most 1000y"]


def test_huge_names_and_values_are_shortened_in_messages():
    name = "a" * 40_000
    error = failure(f"(defmemory {name} " + " ".join(f":k{i} 1" for i in range(100)) + f")\n(defmemory {name})\n"
                    f"(defwebhook w :path \"/w\" :provider {'g' * 40_000} :secret \"s\")")
    assert max(len(line) for line in str(error).splitlines()) < 250
    assert f"unknown keyword :k0 in defmemory {'a' * 37}..." in str(error)


def test_reading_stops_once_enough_problems_are_known():
    error = failure("x\n" * 100_000)
    assert error.more == CHECKED - SHOWN
    assert str(error).endswith(f"and {CHECKED - SHOWN} more problems; checking stopped after {CHECKED}, "
                               "so there may be more")


def test_thousands_of_duplicate_names_are_counted_not_listed():
    error = failure("(defmemory m)\n" * 2_000)
    assert error.diagnostics[0].message == "memory m is already defined at 1:1" and error.more == 1_999 - SHOWN


def test_a_definitions_file_larger_than_the_limit_is_refused_unread(tmp_path):
    huge = tmp_path / "definitions.hy"
    with huge.open("wb") as file:
        file.truncate(1 << 36)  # 64 GiB, sparse: more than reading could hold in memory
    start = time.monotonic()
    with pytest.raises(UserError, match=r"definitions.hy: more than 256.0 KiB, the most a definitions file may hold"):
        load_definitions(huge)
    assert time.monotonic() - start < 1


def test_a_device_that_never_ends_is_read_no_further_than_the_limit():
    with pytest.raises(UserError, match="^/dev/zero: more than 256.0 KiB, the most a definitions file may hold$"):
        load_definitions("/dev/zero")


def test_definitions_past_the_size_limit_are_not_read():
    (diagnostic,) = failure(" " * MAX_SIZE + "(defmemory m :stor org)").diagnostics
    assert (diagnostic.line, diagnostic.message) == (1, f"more than {MAX_SIZE // 1024} KiB of definitions: "
                                                        "cortex reads no more than that from one file")
    block = "#+begin_src hy :cortex yes\n" + " " * (MAX_SIZE // 3) + "\n(defmemory {})\n#+end_src\n"
    with pytest.raises(DslError) as caught:
        extract_from_org("* A\n" + block.format("a") + block.format("b") + block.format("c"), "notes.org")
    assert [(d.line, d.message[:9]) for d in caught.value.diagnostics] == [(11, "more than")]


def test_an_org_file_with_thousands_of_unclosed_blocks_is_read_once():
    blocks = "* Hooks\n" + "#+begin_src hy :cortex yes\n(defmemory m)\n" * 20_000
    assert dsl_seconds(extract_from_org, blocks) < 0.25  # looking for each block's end took over a minute


def test_comments_of_a_brace_file_are_placed_in_linear_time():
    def brace(count):
        return "".join(f"// {i}\nagent a{i} {{ }}\n" for i in range(count))  # skipped blocks: cheap but for comments

    assert growth(convert_brace_syntax, brace, 2_000) < 5  # 9 if quadratic


def test_a_registry_loads_thousands_of_webhooks_in_linear_time():
    hooks = Definitions(webhooks=tuple(WebhookDefinition(f"w{i}", f"/w{i}", Provider.SLACK, "s")
                                       for i in range(20_000)))
    assert dsl_seconds(Registry().load, hooks) < 0.5  # comparing each path with all the others took 6 s
    registry = Registry()
    registry.load(hooks)
    with pytest.raises(DslError, match="path /w7 is already served by webhook w7"):
        registry.load(Definitions(webhooks=(WebhookDefinition("other", "/w7", Provider.SLACK, "s"),)))
    registry.load(Definitions(webhooks=(WebhookDefinition("w7", "/moved", Provider.SLACK, "s"),)))
    registry.register(WebhookDefinition("other", "/w7", Provider.SLACK, "s"))  # w7 left it
    assert registry.webhooks["other"].path == "/w7"


# --- search and serve with broken definitions --------------------------------------------------

BROKEN = '(defmemory agent-memory :search {:vector-weight 0.2})\n(defwebhook w :path "/w" :provider gitlab)\n'


def default_weights_warnings(search) -> list[str]:
    """The messages of the warnings `search()` gives that the definitions were ignored."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search()
    return [str(w.message) for w in caught if "default weights" in str(w.message)]


def test_search_falls_back_to_the_default_weights_when_the_definitions_file_is_broken(cortex, org):
    (org / "definitions.hy").write_text(BROKEN)
    hits = []
    (message,) = default_weights_warnings(lambda: hits.extend(cortex.search("E1042", limit=1)))
    assert message == ("search uses its default weights, as the definitions have problems: "
                       f"{org / 'definitions.hy'}:2:36: unknown provider gitlab; did you mean github? "
                       "(one of github, stripe, slack, standard, custom, jwt)")
    assert hits[0].score == pytest.approx(0.5 * hits[0].vector_norm + 0.5 * hits[0].keyword_norm)


def test_search_warns_once_however_often_it_runs(cortex, org):
    (org / "definitions.hy").write_text(unknown_keys(50))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            assert cortex.search("E1042", limit=1)
    (warning,) = [w for w in caught if "default weights" in str(w.message)]
    assert "\n" not in str(warning.message) and str(warning.message).endswith("(and 49 more)")


def test_search_works_with_a_broken_block_in_an_ingested_org_file(cortex, org):
    (org / "notes" / "hooks.org").write_text("* Hooks\n#+begin_src hy :cortex yes\n" + BROKEN + "#+end_src\n")
    cortex.ingest()
    (message,) = default_weights_warnings(lambda: cortex.search("E1042", limit=1))
    assert f"{org / 'notes' / 'hooks.org'}:4:36: unknown provider gitlab" in message


def test_cortex_search_succeeds_and_cortex_serve_refuses_with_a_short_report(tmp_path, org, capsys):
    (org / "definitions.hy").write_text(unknown_keys(100))
    args = ["--store", str(tmp_path / "store"), "--org", str(org)]
    main(["ingest", *args])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main(["search", "E1042", "-n", "1", *args])
    assert "E1042" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["serve", *args, "--port", "0"])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and "Traceback" not in err
    assert err.startswith(f"cortex: {org / 'definitions.hy'}:1:14: unknown keyword :k0 in defmemory m")
    assert err.rstrip().endswith(f"and {100 - SHOWN} more problems") and len(err.splitlines()) == 3 * SHOWN + 1


def test_the_cli_shows_the_fallback_warning_as_one_line(tmp_path, org):
    (org / "definitions.hy").write_text(BROKEN)
    cortex_bin = Path(sys.executable).with_name("cortex")
    args = ["--store", str(tmp_path / "store"), "--org", str(org)]
    subprocess.run([str(cortex_bin), "ingest", *args], check=True, capture_output=True)
    result = subprocess.run([str(cortex_bin), "search", "E1042", "-n", "1", *args], capture_output=True, text=True)
    assert result.returncode == 0 and "E1042" in result.stdout
    assert result.stderr.splitlines() == [
        f"warning: search uses its default weights, as the definitions have problems: {org / 'definitions.hy'}:2:36: "
        "unknown provider gitlab; did you mean github? (one of github, stripe, slack, standard, custom, jwt)"]
