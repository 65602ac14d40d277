"""The docs keep up with the code: every setting documented once, no link to nowhere.

The settings table of ``docs/settings.md`` is generated from ``zk_recipes.SETTINGS``
(``python tests/test_docs.py`` rewrites it) and this test fails when the two differ,
so a setting cannot be added, renamed or given another default without its docs.
Celery's own settings are checked the same way by the Celery suite
(tests/integrations/celery/test_settings_doc.py): the core suite has no Celery.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from zk_recipes import SETTINGS, Setting, Spelling

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_DOC = ROOT / "docs" / "settings.md"
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
#: Around each generated table: ``<!-- table: NAME -->`` ... ``<!-- end of table -->``.
_TABLE = re.compile(r"(<!-- table: (\S+) .*?-->\n)(.*?)(<!-- end of table -->)", re.DOTALL)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(setting: Setting) -> str:
    if setting.default_text is not None:
        return setting.default_text
    return repr(setting.default)


def settings_table(settings: Sequence[Setting]) -> str:
    """The core's table: each setting once, with its key in every spelling."""
    lines = [
        "| setting | type | default | meaning | Django | Flask, environment | Celery |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in settings:
        keys = (
            Spelling.DJANGO.key(s.name),
            Spelling.FLASK.key(s.name),
            Spelling.CELERY.key(s.name),
        )
        lines.append(
            f"| `{s.name}` | {_cell(s.type)} | {_cell(_default(s))} | {_cell(s.meaning)} | "
            + " | ".join(f"`{k}`" for k in keys)
            + " |"
        )
    assert Spelling.FLASK.key("x") == Spelling.ENV.key("x"), (
        "Flask and the environment share a column"
    )
    return "\n".join(lines) + "\n"


def own_settings_table(settings: Sequence[Setting], spelling: Spelling) -> str:
    """An integration's own settings, by their key in its spelling."""
    lines = ["| setting | type | default | meaning |", "|---|---|---|---|"]
    for s in settings:
        lines.append(
            f"| `{spelling.key(s.name)}` | {_cell(s.type)} | {_cell(_default(s))} | "
            f"{_cell(s.meaning)} |"
        )
    return "\n".join(lines) + "\n"


def generated_tables(text: str) -> dict[str, str]:
    """Each generated table of a page, by its name."""
    return {match.group(2): match.group(3) for match in _TABLE.finditer(text)}


def rewrite_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` with the named generated tables replaced."""

    def replace(match: re.Match[str]) -> str:
        body = tables.get(match.group(2), match.group(3))
        return f"{match.group(1)}{body}{match.group(4)}"

    return _TABLE.sub(replace, text)


def test_the_settings_table_is_generated_from_the_code() -> None:
    tables = generated_tables(SETTINGS_DOC.read_text())
    assert tables.get("settings") == settings_table(SETTINGS), (
        "docs/settings.md differs from zk_recipes.SETTINGS: run python tests/test_docs.py"
    )


def test_the_latest_figures_page_is_generated_from_the_results() -> None:
    """docs/evidence/figures.md says what benchmarks/results/ holds, never older figures."""
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None
    assert spec.loader is not None
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    page = ROOT / "docs" / "evidence" / "figures.md"
    assert page.read_text() == figures.render(), (
        "docs/evidence/figures.md differs from the results: run python benchmarks/figures.py"
    )


def test_every_setting_is_described_once() -> None:
    text = SETTINGS_DOC.read_text()
    for setting in SETTINGS:
        rows = re.findall(rf"^\| `{setting.name}` \|", text, flags=re.MULTILINE)
        assert len(rows) == 1, f"{setting.name}: one row in docs/settings.md"
    # Each plain-data form has its section, with an example
    # (example_projects/recipes/pages/settings_page.py reads them all).
    for heading in ("Retry policies as data", "TLS as data", "Auth, SASL and ACLs as data"):
        assert f"## {heading}\n" in text, heading


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


#: A file included into a page by the docs site (pymdownx.snippets), from the repository root.
#: ``--8<-- "path"`` includes a file, ``--8<-- "path:name"`` its section between the lines
#: ``# --8<-- [start:name]`` and ``# --8<-- [end:name]``.
_SNIPPET = re.compile(r'^[ \t]*--8<-- "([^":]+)(?::([\w-]+))?"$', flags=re.MULTILINE)


def _expanded(path: Path) -> str:
    """The page as the site shows it: each ``--8<-- "file"`` line replaced by that file."""
    return _SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(), path.read_text())


def _included(name: str, section: str) -> str | None:
    """What is wrong with an inclusion, or None."""
    target = ROOT / name
    if not target.is_file():
        return "no such file"
    text = target.read_text()
    if section and not (f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text):
        return f"no section {section!r} in it"
    return None


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", _without_code(_expanded(path)), flags=re.MULTILINE)
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


def test_files_included_into_pages_exist() -> None:
    """Code on the site's pages comes from files the tests run: each must be there."""
    missing = [
        f"{doc.relative_to(ROOT)}: {name}:{section}: {problem}"
        for doc in MARKDOWN
        for name, section in _SNIPPET.findall(doc.read_text())
        if (problem := _included(name, section)) is not None
    ]
    assert missing == []
    assert any(_SNIPPET.search(doc.read_text()) for doc in MARKDOWN)


def test_no_page_retypes_python() -> None:
    """Every Python block of the site is a file (or a section of one) that the suite runs."""
    block = re.compile(r"^[ \t]*```(?:python|py)\b.*?\n(.*?)^[ \t]*```", re.M | re.S)
    retyped = []
    for doc in sorted((ROOT / "docs").rglob("*.md")):
        text = doc.read_text()
        for found in block.finditer(text):
            if not _SNIPPET.search(found.group(1)):
                line = text.count("\n", 0, found.start()) + 1
                retyped.append(f"{doc.relative_to(ROOT)}:{line}")
    assert retyped == [], "include a tested file instead (see docs/recipes/lock.md)"


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


@pytest.mark.parametrize("index", ["docs/index.md", "README.md"])
def test_the_home_page_and_the_readme_link_every_recipe_page(index: str) -> None:
    """A new family's page is named where a new user starts (the recipe table, the docs list)."""
    page = ROOT / index
    linked = {(page.parent / link.partition("#")[0]).resolve() for link in _links(page)}
    recipes = sorted((ROOT / "docs" / "recipes").glob("*.md"))
    assert [str(p.relative_to(ROOT)) for p in recipes if p.resolve() not in linked] == []


#: Each public module, its source and its page of the API reference (docs/reference/).
REFERENCE = {
    "zk_recipes": ("zk_recipes/__init__.py", "zk_recipes.md"),
    "zk_recipes.frameworks": ("zk_recipes/frameworks/__init__.py", "frameworks.md"),
    "zk_recipes.testing": ("zk_recipes/testing/__init__.py", "testing.md"),
    "zk_recipes.metrics": ("zk_recipes/metrics.py", "metrics.md"),
    "zk_recipes.aio": ("zk_recipes/aio/__init__.py", "aio.md"),
    "zk_recipes_django": ("integrations/zk_recipes_django/__init__.py", "django.md"),
    "zk_recipes_flask": ("integrations/zk_recipes_flask/__init__.py", "flask.md"),
    "zk_recipes_celery": ("integrations/zk_recipes_celery/__init__.py", "celery.md"),
    "zk_recipes_starlette": ("integrations/zk_recipes_starlette/__init__.py", "starlette.md"),
}
#: One entry of a reference page: ``::: module.Name`` on a line of its own.
_ENTRY = re.compile(r"^::: ([\w.]+)$", flags=re.MULTILINE)


def public_names(module: str) -> list[str]:
    """The module's ``__all__``, read from its source (no framework needs importing)."""
    tree = ast.parse((ROOT / REFERENCE[module][0]).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                names: list[str] = ast.literal_eval(node.value)
                return names
    raise AssertionError(f"{module} has no __all__")


@pytest.mark.parametrize("module", sorted(REFERENCE))
def test_the_api_reference_has_an_entry_for_every_public_name(module: str) -> None:
    """Each page lists its module's ``__all__``, each name once, and nothing else."""
    page = ROOT / "docs" / "reference" / REFERENCE[module][1]
    entries = _ENTRY.findall(page.read_text())
    listed = [entry.removeprefix(f"{module}.") for entry in entries]
    assert [e for e in entries if not e.startswith(f"{module}.")] == [], "another module's name"
    assert sorted({n for n in listed if listed.count(n) > 1}) == [], "listed twice"
    missing = sorted(set(public_names(module)) - set(listed))
    assert missing == [], f"add `::: {module}.NAME` to {page.relative_to(ROOT)} for each"
    assert sorted(set(listed) - set(public_names(module))) == [], "not in __all__"


def test_every_reference_page_is_a_public_module() -> None:
    pages = {path.name for path in (ROOT / "docs" / "reference").glob("*.md")}
    assert pages == {page for _, page in REFERENCE.values()}


if __name__ == "__main__":  # python tests/test_docs.py: regenerate the core's settings table
    page = SETTINGS_DOC.read_text()
    SETTINGS_DOC.write_text(rewrite_tables(page, {"settings": settings_table(SETTINGS)}))
    sys.exit(0)
