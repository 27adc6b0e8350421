"""defmemory and defwebhook as Hy macros: evaluating a form registers its definition."""

import types
from importlib import resources
from pathlib import Path

import hy
import pytest

from cortex.dsl import DslError, Registry, SourceLocation, current_registry, load_definitions, parse_definitions

EXAMPLE = Path(__file__).resolve().parents[2] / "org" / "definitions.hy"
REQUIRE = "(require cortex.dsl.macros [defmemory defwebhook])\n"


def evaluate(source: str, registry: Registry, filename: str = "<repl>"):
    """Evaluate Hy source in a fresh module, the way the REPL does, with `registry` active."""
    module = types.ModuleType("session")
    with registry.active():
        return hy.eval(hy.read_many(REQUIRE + source, filename=filename), module=module)


def test_evaluating_a_definition_registers_and_returns_it():
    registry = Registry()
    hook = evaluate('(defwebhook github-events\n  :path "/hooks/github" :provider github :secret "s")', registry)
    assert registry.webhooks == {"github-events": hook}
    assert (hook.path, hook.location) == ("/hooks/github", SourceLocation("<repl>", 2, 1))
    memory = evaluate('(defmemory notes :retention "2w")', registry)
    assert registry.memories == {"notes": memory}
    assert registry.definitions().webhooks == (hook,)


def test_the_example_file_runs_as_hy_and_registers_what_the_loader_reads():
    registry = Registry()
    module = types.ModuleType("definitions")
    with registry.active():
        hy.eval(hy.read_many(EXAMPLE.read_text(encoding="utf-8"), filename=str(EXAMPLE)), module=module)
    loaded = load_definitions(EXAMPLE)
    assert registry.definitions() == loaded
    assert [d.location for d in registry.definitions().webhooks] == [d.location for d in loaded.webhooks]


def test_a_bad_form_raises_the_loaders_diagnostics_and_registers_nothing():
    source = '(defwebhook github-events\n  :path "/hooks/github"\n  :provider gihub :secret "s" :colour red)'
    registry = Registry()
    with pytest.raises(DslError) as caught:
        evaluate(source, registry)
    assert registry.webhooks == {}
    with pytest.raises(DslError) as loaded:
        parse_definitions(REQUIRE + source, "<repl>")
    assert caught.value.diagnostics == loaded.value.diagnostics
    assert [(d.line, d.column) for d in caught.value.diagnostics] == [(4, 13), (4, 31)]
    assert str(caught.value).splitlines()[1:3] == ['  :provider gihub :secret "s" :colour red)', "            ^"]


def test_a_form_with_many_problems_raises_the_first_ones_and_a_count():
    keys = " ".join(f":k{i} 1" for i in range(50))
    with pytest.raises(DslError) as caught:
        evaluate(f"(defmemory m {keys})", Registry())
    assert len(caught.value.diagnostics) == 20 and caught.value.more == 30
    assert str(caught.value).endswith("\nand 30 more problems")


def test_redefining_a_name_replaces_it_but_a_taken_path_is_refused():
    registry = Registry()
    evaluate('(defwebhook a :path "/hooks/a" :provider slack :secret "s")', registry)
    evaluate('(defwebhook a :path "/hooks/a" :provider slack :secret "t")', registry)
    assert registry.webhooks["a"].secret == "t"
    taken = r"<repl>:2:1: path /hooks/a is already served by webhook a \(defined at <repl>:2:1\)"
    with pytest.raises(DslError, match=taken):
        evaluate('(defwebhook b :path "/hooks/a" :provider slack :secret "s")', registry)
    assert list(registry.webhooks) == ["a"]


def test_registries_are_separate_and_the_process_has_a_default():
    mine, other = Registry(), Registry()
    evaluate("(defmemory m)", mine)
    assert list(mine.memories) == ["m"] and other.memories == {}
    with other.active():
        assert current_registry() is other
    assert current_registry() is not other and current_registry() is not mine
    module = types.ModuleType("plain")
    default = current_registry()
    hy.eval(hy.read_many(REQUIRE + "(defmemory scratch)"), module=module)
    assert default.memories.pop("scratch").name == "scratch"


def test_a_registry_can_start_from_a_file():
    registry = Registry()
    registry.load(load_definitions(EXAMPLE))
    assert sorted(registry.webhooks) == ["github-events", "stripe-payments"]


def test_the_macros_ship_inside_the_package():
    assert (resources.files("cortex.dsl") / "macros.hy").is_file()
