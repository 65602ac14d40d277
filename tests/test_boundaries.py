"""The package boundaries of STYLE.md, checked on the source (AST only, nothing imported).

Three rules, each a sentence of STYLE.md or of the design's layering:

1. **Public names only outside the core.** ``integrations/``, the public faces
   ``zk_recipes/testing/`` and ``zk_recipes/cli/``, ``example_projects/`` and
   ``benchmarks/`` import ``zk_recipes`` through its facade
   (and public subpackages such as ``zk_recipes.testing``), never a private module
   ``zk_recipes._x`` (``from zk_recipes import _x`` included). What they need and
   cannot get from the facade is a missing public name, not a reason to reach in.
2. **kazoo stays behind its adapter.** No recipe module (a family, or
   ``_internals``) imports ``zk_recipes._client.kazoo``: recipes talk to ``ZkClient``.
3. **Families depend on each other only along Curator's edges** (``ALLOWED_EDGES``).
   ``_client``, ``_internals`` and the top-level leaves are shared by every family and
   import none; no core module imports the facade (``zk_recipes`` itself), which
   would import every family at once.

``find_violations(root)`` works on any directory laid out like this repository, so
the rules are tested on a small tree with deliberate mistakes, too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Public subpackages that are faces over the core, as a user's code is: they import
#: the facade and their own private modules, nothing else private.
FACES = ("zk_recipes/testing", "zk_recipes/cli")
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
#: Shared by all families; they import no family.
SHARED_PACKAGES = ("_client", "_internals")
#: family -> the families it may import (Curator's cross-family edges).
ALLOWED_EDGES: dict[str, frozenset[str]] = {
    "_leader": frozenset({"_locks"}),
    "_counters": frozenset({"_locks"}),
    "_queue": frozenset({"_locks"}),
    "_nodes": frozenset({"_cache"}),
    "discovery": frozenset({"_nodes", "_cache"}),
    # holders() reads the node names the recipes define (their tokens and directories).
    "_inspect": frozenset({"_locks", "_leader"}),
}

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
    return sorted(found)


def test_the_code_keeps_its_boundaries() -> None:
    found = set(find_violations(ROOT))
    assert sorted(found - PENDING) == [], "boundary violations (see this module's docstring)"
    assert sorted(PENDING - found) == [], "fixed: delete these entries from PENDING"


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

    assert find_violations(root) == [
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
