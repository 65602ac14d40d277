"""The package boundaries of STYLE.md and the layering of DESIGN.md, checked on the source.

AST only, nothing imported. Five rules:

1. **Public names only outside the core.** ``integrations/``, the public faces
   (``zk_recipes/frameworks/``, ``zk_recipes/testing/``, ``zk_recipes/cli/``),
   ``example_projects/`` and ``benchmarks/`` import ``zk_recipes`` through its
   facade and public modules, never a private module ``zk_recipes._x``
   (``from zk_recipes import _x`` included). What they need and cannot get from
   the facade is a missing public name, not a reason to reach in.
2. **kazoo stays behind its adapter.** No recipe module (a family, or
   ``_internals``) imports ``zk_recipes._client.kazoo``: recipes talk to ``ZkClient``.
3. **Families depend on each other only along Curator's edges** (``ALLOWED_EDGES``),
   and no core module imports the facade (``zk_recipes`` itself), which would
   import every family at once.
4. **Tiers, lowest first** (``TIERS``): the top-level leaves < ``_client`` <
   ``_internals`` < the families < the facade (``metrics``, then ``zk_recipes``)
   < the faces (``frameworks``, then ``testing``, then ``cli``) < the
   integrations. A module imports its own tier and those below, never one above;
   inside a tier, the order given for it (the leaves among themselves, the
   facade's and the faces' modules; no integration imports another).
5. **No import cycle**, between any two modules of ``zk_recipes/`` and
   ``integrations/``: imports under ``TYPE_CHECKING`` and inside functions
   count, since a cycle of knowledge is a cycle even when Python can load it.

``find_violations(root)`` works on any directory laid out like this repository, so
the rules are tested on small trees with deliberate mistakes, too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Public subpackages that are faces over the core, as a user's code is: they import
#: public names and their own private modules, nothing else private. In tier order.
FACES = ("zk_recipes/frameworks", "zk_recipes/testing", "zk_recipes/cli")
#: Trees outside the core: public names of ``zk_recipes`` only.
OUTSIDE = ("integrations", *FACES, "example_projects", "benchmarks")
#: Curator's recipe families (``recipes.locks``, ``recipes.leader``, ...), as private
#: packages of the core; ``discovery`` is public, as curator-x-discovery is separate.
#: ``_inspect`` reads what the others write (holders): a family that creates nothing.
FAMILIES = (
    "_locks",
    "_leader",
    "_barriers",
    "_counters",
    "_nodes",
    "_cache",
    "_queue",
    "discovery",
    "_inspect",
)
#: Packages whose modules are recipe code: the families and their shared machinery.
RECIPE_PACKAGES = (*FAMILIES, "_internals")
#: The one module that imports kazoo.
KAZOO_ADAPTER = "zk_recipes._client.kazoo"
#: family -> the families it may import (Curator's cross-family edges).
ALLOWED_EDGES: dict[str, frozenset[str]] = {
    "_leader": frozenset({"_locks"}),
    "_counters": frozenset({"_locks"}),
    "_queue": frozenset({"_locks"}),
    "_nodes": frozenset({"_cache"}),
    "discovery": frozenset({"_nodes", "_cache"}),
    # holders() reads the node names the recipes define (their tokens and directories),
    # and a queue item's count of failed attempts (its trailer).
    "_inspect": frozenset({"_locks", "_leader", "_queue"}),
}
#: The top-level private modules of the core (``zk_recipes/_x.py``), lowest first: each
#: imports only those before it. A new leaf goes where its imports put it.
LEAVES = (
    "_errors",
    "_logfields",
    "_threads",
    "_deadline",
    "_paths",
    "_types",
    "_retry",
    "_settings",
    "_setting_values",
    "_config",
    "_metrics",
    "_prometheus",
)
#: The public modules of the facade's tier, lowest first ("" is ``zk_recipes`` itself:
#: it installs the metrics sink, so ``metrics`` sits below it). ``aio`` is the asyncio
#: forms of the recipes: a package over the families, as the facade is.
FACADE = ("metrics", "aio", "")
#: The integrations (``integrations/<name>/``), each a face of its own framework.
INTEGRATIONS = (
    "zk_recipes_django",
    "zk_recipes_celery",
    "zk_recipes_flask",
    "zk_recipes_starlette",
)
#: The tiers, lowest first.
TIERS = ("leaves", "_client", "_internals", "families", "facade", "faces", "integrations")

#: Violations known and not fixed yet: empty. A new violation fails the test; an
#: entry added here must come with an issue that removes it.
PENDING: frozenset[str] = frozenset()


def _module_name(root: Path, path: Path) -> str:
    """The dotted name ``path`` imports as (integrations' packages are top-level)."""
    relative = path.relative_to(root)
    if relative.parts[0] == "integrations":
        relative = relative.relative_to("integrations")
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(module: str, is_package: bool, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything a module imports, relative imports resolved.

    ``from a import b`` yields ``a.b``: ``b`` may be a submodule (``from zk_recipes
    import _paths``) or a name; the callers tell the two apart where it matters.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base


def _is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


def _family(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] == "zk_recipes" and len(parts) > 1 and parts[1] in FAMILIES:
        return parts[1]
    return None


def _is_facade(root: Path, name: str) -> bool:
    """``zk_recipes`` itself or a name re-exported by it (not a module of the core)."""
    parts = name.split(".")
    if parts[0] != "zk_recipes":
        return False
    if len(parts) == 1:
        return True
    if parts[1].startswith("_"):  # the facade re-exports public names only
        return False
    first = root / "zk_recipes" / parts[1]
    return not (first.is_dir() or first.with_suffix(".py").exists())


def _python_files(root: Path, where: str) -> Iterator[Path]:
    base = root / where
    if base.is_dir():
        yield from sorted(p for p in base.rglob("*.py") if ".venv" not in p.parts)


def _placed(module: str) -> tuple[int, int] | None:
    """(tier, rank inside the tier) of a module of the core or an integration; None: unknown.

    Ranks order the modules of a tier that must not import each other both ways:
    the leaves, the facade's modules, the faces; -1 where the tier has no order
    of its own (a package's modules among themselves; the families have their
    edges).
    """
    parts = module.split(".")
    if parts[0] in INTEGRATIONS:
        return TIERS.index("integrations"), INTEGRATIONS.index(parts[0])
    if parts[0] != "zk_recipes":
        return None
    if len(parts) == 1 or parts[1] in FACADE:
        return TIERS.index("facade"), FACADE.index(parts[1] if len(parts) > 1 else "")
    first = parts[1]
    if first == "__main__":
        return TIERS.index("faces"), FACES.index("zk_recipes/cli")
    if f"zk_recipes/{first}" in FACES:
        return TIERS.index("faces"), FACES.index(f"zk_recipes/{first}")
    if first in ("_client", "_internals"):
        return TIERS.index(first), -1
    if first in FAMILIES:
        return TIERS.index("families"), -1
    if first in LEAVES:
        return TIERS.index("leaves"), LEAVES.index(first)
    return None


def _known_module(modules: set[str], name: str) -> str | None:
    """The module ``name`` lives in: its longest prefix that is a module of ours."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _import_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {imported module of ours: first line}, for zk_recipes/ and integrations/."""
    files = {
        _module_name(root, path): path
        for where in ("zk_recipes", "integrations")
        for path in _python_files(root, where)
    }
    modules = set(files)
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: dict[str, int] = {}
        for line, name in _imported(module, path.name == "__init__.py", tree):
            target = _known_module(modules, name)
            # A module's own package's __init__ is loaded first anyway: not an edge of its.
            if target is None or target == module or module.startswith(target + "."):
                continue
            edges.setdefault(target, line)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _tier_violation(module: str, target: str) -> str | None:
    """Why ``module`` may not import ``target`` under rule 4, or None."""
    here, there = _placed(module), _placed(target)
    if here is None or there is None:
        return None  # reported once per unknown module by the caller
    (tier, rank), (other_tier, other_rank) = here, there
    if other_tier > tier:
        return f"the {TIERS[tier]} tier imports the {TIERS[other_tier]} tier above it"
    if other_tier < tier or rank == -1:
        return None
    if TIERS[tier] == "integrations" and other_rank != rank:
        return "one integration imports another (share through the core or the kit)"
    if other_rank > rank:
        return f"{TIERS[tier]} are ordered ({_tier_order(tier)}): this one imports a later one"
    return None


def _tier_order(tier: int) -> str:
    names = {"leaves": LEAVES, "facade": FACADE, "faces": FACES}.get(TIERS[tier], ())
    return " < ".join(name.rsplit("/", 1)[-1] or "zk_recipes" for name in names)


def find_violations(root: Path) -> list[str]:
    """Every boundary violation under ``root``, as ``"<path>: <what>"`` lines."""
    found: set[str] = set()

    def scan(path: Path) -> Iterator[tuple[int, str]]:
        tree = ast.parse(path.read_text(), filename=str(path))
        yield from _imported(_module_name(root, path), path.name == "__init__.py", tree)

    # 1. outside the core: public names only
    for where in OUTSIDE:
        for path in _python_files(root, where):
            rel = path.relative_to(root).as_posix()
            for _, name in scan(path):
                if name.split(".")[0] == "zk_recipes" and _is_private(name):
                    if where in FACES and name.startswith(where.replace("/", ".") + "."):
                        continue  # the face's own private modules
                    private = name.split(".")
                    shown = ".".join(
                        private[: next(i for i, p in enumerate(private) if p.startswith("_")) + 1]
                    )
                    found.add(f"{rel}: imports private {shown} (use the public zk_recipes names)")

    # 2 and 3: inside the core
    for path in _python_files(root, "zk_recipes"):
        rel = path.relative_to(root).as_posix()
        parts = path.relative_to(root / "zk_recipes").parts
        if f"zk_recipes/{parts[0]}" in FACES or parts in (("__init__.py",), ("__main__.py",)):
            continue
        if parts[0] in FACADE:  # a package of the facade's tier: above the families
            continue
        package = parts[0] if len(parts) > 1 else None
        own = package if package in FAMILIES else None
        for _, name in scan(path):
            if package in RECIPE_PACKAGES and (
                name == KAZOO_ADAPTER or name.startswith(KAZOO_ADAPTER + ".")
            ):
                found.add(f"{rel}: imports {KAZOO_ADAPTER}")
            if _is_facade(root, name):
                found.add(
                    f"{rel}: imports the facade ({name}), which imports every family: "
                    "import the private module that defines the name"
                )
                continue
            other = _family(name)
            if other is None or other == own:
                continue
            if own is None:
                found.add(
                    f"{rel}: shared code imports the {other} family "
                    "(move what both need into _internals)"
                )
            elif other not in ALLOWED_EDGES.get(own, frozenset()):
                found.add(
                    f"{rel}: the {own} family imports the {other} family, "
                    "which is not an allowed edge (ALLOWED_EDGES in tests/test_boundaries.py)"
                )

    # 4 and 5: tiers and cycles, over every module of the core and the integrations
    graph = _import_graph(root)
    file_of = {
        _module_name(root, path): path.relative_to(root).as_posix()
        for top in ("zk_recipes", "integrations")
        for path in _python_files(root, top)
    }
    for module, edges in graph.items():
        if _placed(module) is None:
            found.add(
                f"{file_of[module]}: in no tier (place it in TIERS' order: LEAVES, FACADE, "
                "FACES or INTEGRATIONS in tests/test_boundaries.py)"
            )
            continue
        for target, line in edges.items():
            why = _tier_violation(module, target)
            if why is not None:
                found.add(f"{file_of[module]}:{line}: imports {target}: {why}")
    for cycle in _cycles(graph):
        found.add(f"import cycle: {' -> '.join(cycle)} (each imports another of them)")
    return sorted(found)


def test_the_code_keeps_its_boundaries() -> None:
    found = set(find_violations(ROOT))
    assert sorted(found - PENDING) == [], "boundary violations (see this module's docstring)"
    assert sorted(PENDING - found) == [], "fixed: delete these entries from PENDING"


def test_every_leaf_and_family_on_disk_is_placed() -> None:
    """A new top-level module or package must be given a tier, not slip past rule 4."""
    core = ROOT / "zk_recipes"
    names = {p.stem for p in core.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in core.iterdir() if (p / "__init__.py").exists()
    }
    unplaced = sorted(name for name in names if _placed(f"zk_recipes.{name}") is None)
    assert unplaced == [], "give these a tier in tests/test_boundaries.py"
    integrations = sorted(p.name for p in (ROOT / "integrations").iterdir() if p.is_dir())
    assert [n for n in integrations if not n.startswith("__")] == sorted(INTEGRATIONS)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_checker_reports_each_kind_of_violation(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "zk_recipes/__init__.py": "from zk_recipes._locks.lock import Lock\n",
            "zk_recipes/_errors.py": "",
            "zk_recipes/_client/__init__.py": "",
            "zk_recipes/_client/kazoo.py": "import kazoo\n",
            "zk_recipes/_client/client.py": "from zk_recipes._locks.lock import Lock\n",
            "zk_recipes/_locks/__init__.py": "",
            "zk_recipes/_locks/lock.py": (
                "from zk_recipes._client import kazoo\nfrom .._errors import LockLost\n"
            ),
            "zk_recipes/_leader/__init__.py": "",
            "zk_recipes/_leader/latch.py": (
                "from zk_recipes._locks.lock import Lock\n"  # allowed edge
                "from ..discovery import ServiceDiscovery\n"  # not allowed
            ),
            "zk_recipes/_barriers/__init__.py": "",
            "zk_recipes/_barriers/barrier.py": "from zk_recipes import Lock\n",
            "zk_recipes/discovery/__init__.py": "from zk_recipes._nodes import x\n",
            "zk_recipes/testing/__init__.py": (
                "from zk_recipes.testing._server import S\nfrom zk_recipes import _errors\n"
            ),
            "integrations/zk_recipes_celery/__init__.py": (
                "from zk_recipes import Lock\nimport zk_recipes._client.client\n"
            ),
            "benchmarks/locks.py": "from zk_recipes._locks.lock import Lock\n",
            "example_projects/site/app.py": "from zk_recipes.testing._redis import R\n",
        },
    )

    violations = find_violations(root)
    rules_1_to_3 = [v for v in violations if "tier" not in v and "cycle" not in v]
    assert rules_1_to_3 == [
        "benchmarks/locks.py: imports private zk_recipes._locks (use the public zk_recipes names)",
        "example_projects/site/app.py: imports private zk_recipes.testing._redis "
        "(use the public zk_recipes names)",
        "integrations/zk_recipes_celery/__init__.py: imports private zk_recipes._client "
        "(use the public zk_recipes names)",
        "zk_recipes/_barriers/barrier.py: imports the facade (zk_recipes.Lock), which imports "
        "every family: import the private module that defines the name",
        "zk_recipes/_client/client.py: shared code imports the _locks family "
        "(move what both need into _internals)",
        "zk_recipes/_leader/latch.py: the _leader family imports the discovery family, which "
        "is not an allowed edge (ALLOWED_EDGES in tests/test_boundaries.py)",
        "zk_recipes/_locks/lock.py: imports zk_recipes._client.kazoo",
        "zk_recipes/testing/__init__.py: imports private zk_recipes._errors "
        "(use the public zk_recipes names)",
    ]


def test_a_wrong_import_between_two_tiers_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "zk_recipes/__init__.py": "from zk_recipes._locks.lock import Lock\n",
            "zk_recipes/_errors.py": "",
            "zk_recipes/_types.py": "from zk_recipes._errors import E\n",  # down: fine
            # a leaf reaching up into a later leaf, and up into the session layer:
            "zk_recipes/_paths.py": "from zk_recipes._types import T\n",
            "zk_recipes/_metrics.py": "from zk_recipes import _prometheus\n",
            "zk_recipes/_prometheus.py": "",
            "zk_recipes/_deadline.py": "from zk_recipes._client.client import ZkClient\n",
            "zk_recipes/_client/__init__.py": "",
            "zk_recipes/_client/client.py": "from zk_recipes._threads import run_in_thread\n",
            "zk_recipes/_threads.py": "",
            # the session layer reaching up into the recipes' machinery:
            "zk_recipes/_client/states.py": (
                "from zk_recipes._internals.contenders import Entry\n"
            ),
            "zk_recipes/_internals/__init__.py": "",
            "zk_recipes/_internals/contenders.py": "from zk_recipes._client.client import Z\n",
            "zk_recipes/_locks/__init__.py": "",
            "zk_recipes/_locks/lock.py": "from zk_recipes._internals.contenders import Entry\n",
            # the kit below the command line, not above it:
            "zk_recipes/frameworks/__init__.py": "from zk_recipes.cli import run_locked\n",
            "zk_recipes/cli/__init__.py": "from zk_recipes.frameworks import lock_path\n",
            "integrations/zk_recipes_flask/__init__.py": "import zk_recipes_django\n",
            "integrations/zk_recipes_django/__init__.py": "from zk_recipes.cli import x\n",
            "zk_recipes/_newthing.py": "",
        },
    )

    tiers = [v for v in find_violations(root) if "tier" in v or "ordered" in v or "integ" in v]
    assert tiers == [
        "integrations/zk_recipes_flask/__init__.py:1: imports zk_recipes_django: one "
        "integration imports another (share through the core or the kit)",
        "zk_recipes/_client/states.py:1: imports zk_recipes._internals.contenders: the "
        "_client tier imports the _internals tier above it",
        "zk_recipes/_deadline.py:1: imports zk_recipes._client.client: the leaves tier "
        "imports the _client tier above it",
        "zk_recipes/_metrics.py:1: imports zk_recipes._prometheus: leaves are ordered ("
        + " < ".join(LEAVES)
        + "): this one imports a later one",
        "zk_recipes/_newthing.py: in no tier (place it in TIERS' order: LEAVES, FACADE, "
        "FACES or INTEGRATIONS in tests/test_boundaries.py)",
        "zk_recipes/_paths.py:1: imports zk_recipes._types: leaves are ordered ("
        + " < ".join(LEAVES)
        + "): this one imports a later one",
        "zk_recipes/frameworks/__init__.py:1: imports zk_recipes.cli: faces are ordered "
        "(frameworks < testing < cli): this one imports a later one",
    ]


def test_a_cycle_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "zk_recipes/__init__.py": "",
            "zk_recipes/_client/__init__.py": "",
            # a cycle Python can load (the import is only for the type checker) still counts
            "zk_recipes/_client/client.py": "from zk_recipes._client.creates import Creator\n",
            "zk_recipes/_client/creates.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from zk_recipes._client import client\n"
            ),
            "integrations/zk_recipes_flask/__init__.py": "from . import _extension\n",
            "integrations/zk_recipes_flask/_extension.py": "from ._cli import group\n",
            "integrations/zk_recipes_flask/_cli.py": (
                "def f():\n    from zk_recipes_flask._extension import state_of\n"
            ),
        },
    )

    assert [v for v in find_violations(root) if "cycle" in v] == [
        "import cycle: zk_recipes._client.client -> zk_recipes._client.creates "
        "(each imports another of them)",
        "import cycle: zk_recipes_flask._cli -> zk_recipes_flask._extension "
        "(each imports another of them)",
    ]


@pytest.mark.parametrize(
    ("source", "resolved"),
    [
        ("from . import kazoo", "zk_recipes._client.kazoo"),
        ("from .kazoo import CreateMode", "zk_recipes._client.kazoo.CreateMode"),
        ("from .. import _paths", "zk_recipes._paths"),
        ("from .._locks.lock import Lock", "zk_recipes._locks.lock.Lock"),
        ("import zk_recipes._client.kazoo as adapter", "zk_recipes._client.kazoo"),
    ],
)
def test_relative_imports_are_resolved(source: str, resolved: str) -> None:
    names = [name for _, name in _imported("zk_recipes._client.client", False, ast.parse(source))]
    assert names == [resolved]
