"""Each recipe page's example, as the page shows it, runs against a real server.

The pages include their code from example_projects/recipes/pages/ (the
``example`` section of each recipe's file; client.md and the operations
pages name theirs), so what a reader copies is what runs here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from zk_recipes._inspect import layouts

PAGES = Path(__file__).resolve().parent.parent / "example_projects" / "recipes" / "pages"
EXAMPLES = sorted(path.stem for path in PAGES.glob("*_page.py"))


@pytest.mark.parametrize("module", EXAMPLES)
def test_the_pages_example_runs(
    module: str, zk_hosts: str, monkeypatch: pytest.MonkeyPatch, templates: None
) -> None:
    # What the examples register process-wide (metrics path templates, holders layouts)
    # is put back afterwards: ``templates`` restores the former, this the latter.
    monkeypatch.setattr(layouts, "_registered", list(layouts._registered))
    monkeypatch.syspath_prepend(str(PAGES))
    example = importlib.import_module(module)
    example.main(zk_hosts)


def test_every_recipe_page_with_code_includes_a_tested_example() -> None:
    docs = PAGES.parents[2] / "docs" / "recipes"
    included = {
        page.stem
        for page in docs.glob("*.md")
        if "example_projects/recipes/pages/" in page.read_text()
    }
    not_recipes = {
        "asyncio",
        "client",
        "ensemble",
        "operations",
        "security",
        "settings",
        "sigterm",
        "testing",
    }
    recipes = {name.removesuffix("_page").replace("_", "-") for name in EXAMPLES} - not_recipes
    assert recipes <= included
    # That no page (recipe or other) retypes Python is tests/test_docs.py's check.
