"""The package's layering: which ``fused_quant`` module may import which.

Every module under ``fused_quant/`` is parsed with ``ast`` (nothing is imported or executed) and
its ``fused_quant.*`` imports are collected: module-level ones, those under ``if TYPE_CHECKING:``
or ``try:``, and those inside functions (a deferred import is still a dependency; deferring one
only hides a cycle until the function runs). Imports by string (``importlib.import_module``,
e.g. ``selection.load_backends`` loading the backend folders) are not seen: that is how the
lower layers reach the upper ones on purpose.

Checked: no import cycle among modules; no module imports one of a higher layer (within a layer
any direction is fine); every module is in exactly one layer, so a new file must be placed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fused_quant

# Layer number -> the modules in it, bottom (1) to top. "x.*" is the package x and everything
# under it; "fused_quant" alone is the package's __init__.
# Numbered as docs/ARCHITECTURE.md numbers them. reference.py (the spec in pure torch) validates
# its input with validation's checks, so it sits in the contract/validation layer.
LAYERS: dict[int, tuple[str, ...]] = {
    1: ("fused_quant.errors", "fused_quant.activations", "fused_quant.keys", "fused_quant.numerics",
        "fused_quant.envs", "fused_quant.flags", "fused_quant.tracing", "fused_quant.runtime", "fused_quant.platforms.*",
        "fused_quant.selftest_vectors"),
    2: ("fused_quant.contract", "fused_quant.validation", "fused_quant.selection", "fused_quant.reference"),
    3: ("fused_quant.registry", "fused_quant.gemm"),
    4: ("fused_quant.ops",),
    5: ("fused_quant.kernels.*", "fused_quant.backends.*"),
    6: ("fused_quant.modules",),
    7: ("fused_quant.integrations.*", "fused_quant.selftest", "fused_quant.cli", "fused_quant.__main__",
        "fused_quant"),
}

PACKAGE = Path(fused_quant.__file__).resolve().parent


# --- reading the package ----------------------------------------------------------------------


def module_name(path: Path, root: Path) -> str:
    """``root/a/b.py`` -> ``fused_quant.a.b``; ``root/a/__init__.py`` -> ``fused_quant.a``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imported_modules(source: str, name: str, is_package: bool, known: set[str],
                     filename: str = "<src>") -> dict[str, int]:
    """The modules of ``known`` that ``source`` (module ``name``) imports, at any depth of the file,
    each with the line of its first import.

    ``from pkg import x`` is ``pkg.x`` when that is a module (a file or a folder), else ``pkg``
    itself (x is a name defined in pkg's __init__). Relative imports are resolved against the
    module's package. Parent packages a dotted import passes through are not counted: every
    import would otherwise depend on ``fused_quant/__init__.py``.
    """
    top = name.split(".")[0]
    here = name if is_package else name.rpartition(".")[0]
    found: dict[str, int] = {}
    nodes = sorted((n for n in ast.walk(ast.parse(source, filename)) if isinstance(n, (ast.Import, ast.ImportFrom))),
                   key=lambda n: n.lineno)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != top:
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.setdefault(sub if sub in known else module, node.lineno)
    return {m: line for m, line in found.items() if m in known and m != name}


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> the package modules it imports (each with the line of its first import)."""
    files = package_modules(root)
    known = set(files)
    return {name: imported_modules(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", known,
                                   str(path))
            for name, path in files.items()}


def layer_of(module: str, layers: dict[int, tuple[str, ...]] = LAYERS) -> int | None:
    """The layer whose entry matches ``module`` (an exact name before a ``.*`` prefix; the longest
    prefix wins), or None."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for layer, entries in layers.items():
        for entry in entries:
            if entry == module:
                return layer
            if entry.endswith(".*"):
                prefix = entry[:-2]
                if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), layer)
    return None if best is None else best[1]


def find_cycles(graph) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component that has one (Tarjan);
    ``graph`` maps a module to the modules it imports (a set, or a dict keyed by them)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_through(component, graph) for component in components]


def _cycle_through(component: list[str], graph) -> list[str]:
    """A shortest cycle from the component's first module back to itself (breadth-first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(set(graph[v]) & members):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start} in {component}")  # Tarjan gave a component without one


# --- the checks -------------------------------------------------------------------------------


def test_every_module_is_in_a_layer():
    """A new file must be placed in LAYERS; an entry must name a module that exists (a stale
    entry would silently place nothing)."""
    modules = package_modules(PACKAGE)
    assert len(modules) > 20, f"expected the whole package under {PACKAGE}, found {len(modules)} modules"
    unplaced = sorted(m for m in modules if layer_of(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS in {__file__}): {unplaced}"
    stale = sorted(entry for entries in LAYERS.values() for entry in entries
                   if not any(layer_of(m, {0: (entry,)}) == 0 for m in modules))
    assert not stale, f"LAYERS entries matching no module under {PACKAGE}: {stale}"
    twice = sorted(entry for entry in (e for es in LAYERS.values() for e in es)
                   if sum(entry in es for es in LAYERS.values()) > 1)
    assert not twice, f"LAYERS entries in more than one layer: {twice}"


def test_no_import_cycle():
    cycles = find_cycles(import_graph(PACKAGE))
    assert not cycles, "import cycles among fused_quant modules:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_a_higher_layer():
    graph, files = import_graph(PACKAGE), package_modules(PACKAGE)
    bad = sorted((importer, layer_of(importer), imported, layer_of(imported), line)
                 for importer, imports in graph.items() for imported, line in imports.items()
                 if None not in (layer_of(importer), layer_of(imported)) and layer_of(imported) > layer_of(importer))
    assert not bad, ("imports of a higher layer (importer [layer] -> imported [layer], where):\n"
                     + "\n".join(f"  {a} [{la}] -> {b} [{lb}]  ({files[a].relative_to(PACKAGE.parent)}:{line})"
                                  for a, la, b, lb, line in bad))


# --- the detectors themselves -----------------------------------------------------------------


def test_the_import_reader_resolves_submodules_names_and_relative_imports():
    """Checked on source text, so a reader that found nothing could not pass the checks above vacuously."""
    known = {"fused_quant", "fused_quant.keys", "fused_quant.platforms", "fused_quant.platforms.info",
             "fused_quant.ops", "fused_quant.registry"}
    source = (
        "import os\n"
        "import fused_quant.platforms.info\n"
        "from fused_quant import keys, QuantLinear\n"  # a submodule, and a name of the __init__
        "from . import info\n"  # relative, inside the package fused_quant.platforms
        "from .. import ops as o\n"
        "def f():\n"
        "    from fused_quant.registry import lookup\n"  # a name of registry, inside a function
    )
    got = imported_modules(source, "fused_quant.platforms.probe", False, known)
    assert got == {"fused_quant.platforms.info": 2, "fused_quant.keys": 3, "fused_quant": 3, "fused_quant.ops": 5,
                   "fused_quant.registry": 7}, got
    # in a package's __init__, "." is the package itself
    got = imported_modules("from . import info\n", "fused_quant.platforms", True, known)
    assert got == {"fused_quant.platforms.info": 1}, got


def test_the_cycle_finder_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_layer_lookup():
    assert layer_of("fused_quant") == 7 and layer_of("fused_quant.__main__") == 7
    assert layer_of("fused_quant.platforms") == 1 and layer_of("fused_quant.platforms.probe") == 1
    assert layer_of("fused_quant.kernels.triton.act_quant") == 5
    assert layer_of("fused_quant.selftest") == 7 and layer_of("fused_quant.selftest_vectors") == 1
    assert layer_of("fused_quant.no_such_module") is None
