"""ARCHITECTURE.md stays the map: every module of the package is named there, and every import points down the
layers it draws (or is one of the few allowed below, each saying why)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cortex"
MAP = ROOT / "ARCHITECTURE.md"

# Bottom first, as ARCHITECTURE.md's table draws them: a module imports from its own layer and those below.
LAYERS = [
    ("core", ["errors", "hashing", "codec", "objects", "words", "bounded", "paths", "reads", "retry", "locks",
              "listen", "serving", "lazy", "prefixes"]),
    ("org", ["org"]),
    ("backends", ["backends"]),
    ("store", ["files", "scan", "location", "ingest", "query", "history"]),
    ("workspace", ["workspace", "review"]),
    ("language", ["dsl"]),
    ("memory", ["memory"]),
    ("search", ["search", "orgquery"]),
    ("webhooks", ["webhooks"]),
    ("api", ["api"]),
    ("doors", ["cli", "repl", "mcp", "hooks", "lsp"]),
]

# Imports that point up a layer, each with its reason.
ALLOWED: set[tuple[str, str]] = set()  # none now: an entry names its reason in a comment


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name under `cortex` ("memory.agents"), packages' __init__ left out."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            found[".".join(path.relative_to(PACKAGE).with_suffix("").parts)] = path
    for path in PACKAGE.rglob("*.hy"):
        found[".".join(path.relative_to(PACKAGE).with_suffix("").parts)] = path
    return found


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    return next(n for n, (_, tops) in enumerate(LAYERS) if top in tops)


def imports(module: str, path: Path) -> set[str]:
    """The modules of the package `module` imports, wherever the import stands (types-only imports left out)."""
    package = module.split(".")[:-1]
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").startswith("cortex."):
                target = node.module[len("cortex."):]
            else:
                continue
            found.update(name for name in [target, *(f"{target}.{alias.name}" if target else alias.name
                                                      for alias in node.names)] if name)
        elif isinstance(node, ast.Import):
            found.update(alias.name[len("cortex."):] for alias in node.names if alias.name.startswith("cortex."))
    return found


def test_the_map_names_every_module_and_only_modules_that_exist():
    text = MAP.read_text()
    named = {match.replace("/", ".").rsplit(".", 1)[0]
             for match in re.findall(r"`([a-z_/]+\.(?:py|hy))`", text) if not match.startswith("tests/")}
    assert sorted(set(modules()) - named) == [], "modules ARCHITECTURE.md does not name"
    assert sorted(named - set(modules())) == [], "ARCHITECTURE.md names modules that do not exist"


def test_every_module_has_a_layer():
    for module in modules():
        assert layer_of(module) >= 0, module


def test_imports_point_down_the_layers():
    known = modules()
    upward = set()
    for module, path in known.items():
        if path.suffix != ".py":
            continue
        for target in imports(module, path):
            if target not in known:  # a name a module defines, or a package: the module it is in
                target = target.rsplit(".", 1)[0] if target.rsplit(".", 1)[0] in known else target
            if target.split(".")[0] not in {top for _, tops in LAYERS for top in tops}:
                continue
            if layer_of(target) > layer_of(module) and (module.split(".")[0], target) not in ALLOWED:
                upward.add(f"{module} -> {target}")
    assert sorted(upward) == []


def test_the_table_of_layers_is_the_one_this_test_checks():
    rows = re.findall(r"^\| ([a-z]+) \| (.+?) \|", MAP.read_text(), re.M)
    drawn = [(name, sorted(re.sub(r"\.py$|/$", "", room) for room in re.findall(r"`([^`]+)`", rooms)))
             for name, rooms in rows if name != "layer"]
    assert drawn == [(name, sorted(tops)) for name, tops in LAYERS]
