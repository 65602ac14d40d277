"""The house's size limit, written once: a module over it says why it stays whole.

STYLE.md asks for modules that hold one idea, most under ``HOUSE_LIMIT`` lines.
A module of the core, the faces or the integrations over it carries a paragraph
starting ``Size:`` in its docstring, saying why it is one idea anyway; a module
under it carries none (a note that outlived a split would mislead). The notes
name this test instead of a number, so the number lives here only. No module
passes ``CEILING``, whatever its note says.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Lines of a module above which it must say why it stays whole.
HOUSE_LIMIT = 400
#: Lines no module may pass, note or not: past it, split along the seam its note names.
CEILING = 600


def _modules() -> list[Path]:
    return sorted(
        path
        for where in ("zk_recipes", "integrations")
        for path in (ROOT / where).rglob("*.py")
        if ".venv" not in path.parts and "migrations" not in path.parts
    )


def _has_size_note(path: Path) -> bool:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return any(line.startswith("Size:") for line in docstring.splitlines())


def test_a_module_over_the_limit_says_why_and_one_under_it_does_not() -> None:
    over_without, under_with = [], []
    for path in _modules():
        lines = len(path.read_text().splitlines())
        noted = _has_size_note(path)
        name = f"{path.relative_to(ROOT)} ({lines} lines)"
        if lines > HOUSE_LIMIT and not noted:
            over_without.append(name)
        elif lines <= HOUSE_LIMIT and noted:
            under_with.append(name)
    assert over_without == [], (
        f"over {HOUSE_LIMIT} lines: split them, or say why they stay whole in a 'Size:' "
        "paragraph of the module docstring"
    )
    assert under_with == [], "under the limit now: drop their 'Size:' paragraph"


def test_no_module_passes_the_ceiling() -> None:
    over = [
        f"{path.relative_to(ROOT)} ({lines} lines)"
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > CEILING
    ]
    assert over == [], (
        f"over {CEILING} lines, the hard ceiling: split them along the seam their "
        "'Size:' note names"
    )
