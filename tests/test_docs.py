"""The docs keep up with the code: every setting documented once, no link to nowhere.

``docs/settings.md`` is written by hand until it is generated from a settings
table; until then this test holds it to ``ClientSettings`` and to the names
the Celery integration reads (from its source: the core suite has no Celery).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from zk_recipes import ClientSettings

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_DOC = ROOT / "docs" / "settings.md"
CELERY_CONFIG = ROOT / "integrations" / "zk_recipes_celery" / "_config.py"
#: Markdown that links to other files of the repository.
MARKDOWN = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "example_projects").rglob("*.md"),
        *(ROOT / "benchmarks").rglob("*.md"),
    ]
)
#: Source whose docstrings and messages name docs pages.
SOURCES = ("zk_recipes", "integrations", "example_projects", "benchmarks", "scripts")


def _section(text: str, heading: str) -> str:
    """The text under ``## heading``, up to the next ``## ``."""
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _rows(section: str) -> dict[str, list[str]]:
    """Table rows keyed by their first cell's `name`: the other cells (``\\|`` kept)."""
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|(.*)\|\s*$", line)
        if match:
            name = match.group(1)
            assert name not in rows, f"{name} is described twice in one table"
            rows[name] = re.split(r"(?<!\\)\|", match.group(2))
    return rows


def _celery_setting_names() -> set[str]:
    """Every ``zk_recipes_*`` name the Celery integration reads (string constants)."""
    tree = ast.parse(CELERY_CONFIG.read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"zk_recipes_[a-z_]+", node.value)
    }


def _celery_client_fields() -> dict[str, str]:
    """``_CLIENT_FIELDS`` of the Celery config: setting name -> ClientSettings field."""
    tree = ast.parse(CELERY_CONFIG.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_CLIENT_FIELDS" for t in node.targets
        ):
            mapping = ast.literal_eval(node.value)
            assert isinstance(mapping, dict)
            return {str(k): str(v) for k, v in mapping.items()}
    raise AssertionError(f"no _CLIENT_FIELDS in {CELERY_CONFIG}")


def test_every_client_setting_is_documented_once_with_its_celery_spelling() -> None:
    rows = _rows(_section(SETTINGS_DOC.read_text(), "Client settings"))
    fields = [f.name for f in dataclasses.fields(ClientSettings)]
    assert sorted(rows) == sorted(fields), "one row per ClientSettings field, and no other"
    own_setting = {field: setting for setting, field in _celery_client_fields().items()}
    for field in fields:
        celery = rows[field][-1].strip()
        expected = own_setting.get(field, f'zk_recipes_client_options["{field}"]')
        assert celery == f"`{expected}`", f"{field}: Celery spelling"


def test_every_celery_setting_is_documented() -> None:
    text = SETTINGS_DOC.read_text()
    celery_rows = _rows(_section(text, "Celery settings"))
    own = set(_celery_client_fields())
    names = _celery_setting_names()
    assert names >= own | {"zk_recipes_client_options", "zk_recipes_prefix"}
    assert sorted(names - own) == sorted(celery_rows), "one row per integration setting"
    for name in own:
        assert f"`{name}`" in _section(text, "Client settings"), name


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", _without_code(path.read_text()), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _links(path: Path) -> Iterator[str]:
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(path.read_text())):
        if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            yield target


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_docs_resolve(doc: Path) -> None:
    broken = []
    for link in _links(doc):
        file_part, _, anchor = link.partition("#")
        target = (doc.parent / file_part).resolve() if file_part else doc
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    assert broken == []


def test_docs_pages_named_in_the_source_exist() -> None:
    missing = set()
    for where in SOURCES:
        for path in sorted((ROOT / where).rglob("*")):
            if path.suffix not in (".py", ".sh") or ".venv" in path.parts:
                continue
            for name in re.findall(r"\bdocs/[\w/.-]+?\.md", path.read_text()):
                if not (ROOT / name).exists():
                    missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert sorted(missing) == []
