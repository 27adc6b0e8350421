"""The tests mirror the package: the test of `cortex/X/Y.py` is `tests/X/test_Y.py` (a further file for one module
is `tests/X/test_Y_<aspect>.py`). Walks across layers are in tests/scenarios/, and checks against an outside
reference (Emacs's own answers, the contracts every engine and driver passes) in tests/oracle/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "cortex"
ELSEWHERE = {"scenarios", "oracle", "data"}  # tests of no one module, and the tests' data
WHOLE = {"test_design.py", "test_layout.py"}  # tests of the project as a whole: its map, its tests' layout


def module_tests() -> list[Path]:
    """Every test file outside the folders of tests of no one module."""
    return sorted(p for pattern in ("test_*.py", "test_*.hy") for p in TESTS.rglob(pattern)
                  if p.relative_to(TESTS).parts[0] not in ELSEWHERE and p.relative_to(TESTS).as_posix() not in WHOLE)


def misplaced(test: Path) -> str | None:
    """Why `test` (a file under tests/) is named after no module in the place it mirrors, or None."""
    where = test.relative_to(TESTS)
    folder = PACKAGE.joinpath(*where.parts[:-1])
    shown = folder.relative_to(PACKAGE.parent).as_posix()
    if not folder.is_dir():
        return f"tests/{where}: there is no {shown}/ to mirror"
    name = test.stem.removeprefix("test_")
    modules = {p.stem for suffix in ("py", "hy") for p in folder.glob(f"*.{suffix}") if not p.stem.startswith("__")}
    if any(name == module or name.startswith(module + "_") for module in modules):
        return None
    return f"tests/{where}: names no module of {shown}/ (test_Y.py or test_Y_<aspect>.py tests {shown}/Y.py)"


def test_every_test_file_is_named_after_a_module_in_the_place_it_mirrors():
    found = module_tests()
    assert len(found) > 50  # the walk finds the tests
    problems = [problem for problem in map(misplaced, found) if problem]
    assert not problems, "\n".join(problems)


def test_a_test_file_named_after_no_module_or_in_no_package_is_found():
    assert misplaced(TESTS / "memory" / "test_agents.py") is None
    assert misplaced(TESTS / "memory" / "test_agents_groups.py") is None  # a further file for memory/agents.py
    assert misplaced(TESTS / "dsl" / "test_macros.hy") is None  # dsl/macros.hy
    assert misplaced(TESTS / "test_agents.py") == ("tests/test_agents.py: names no module of cortex/ "
                                                   "(test_Y.py or test_Y_<aspect>.py tests cortex/Y.py)")
    assert misplaced(TESTS / "memory" / "test_agentsx.py") is not None
    assert misplaced(TESTS / "nowhere" / "test_x.py") == ("tests/nowhere/test_x.py: "
                                                         "there is no cortex/nowhere/ to mirror")
