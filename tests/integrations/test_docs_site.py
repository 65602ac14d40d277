"""The documentation site builds strictly and reads in a real browser: navigation, search, API.

``mkdocs build --strict`` (mkdocs.yml) into a temporary directory, served
over HTTP (the search runs in a web worker, which a file:// page may not
start), then Debian's chromium opens the home page, a recipe page and the
API reference. The README's test command also builds the site on its own,
so a broken page fails CI even where chromium is missing.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.browser import headless_chromium

ROOT = Path(__file__).resolve().parents[2]
#: The screenshot kept in the docs (docs/testing.md shows it): refreshed with
#: ``ZK_RECIPES_UPDATE_SCREENSHOT=1``.
SCREENSHOT = ROOT / "docs" / "img" / "docs-site.png"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site, served on a free loopback port: its base URL."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    handler = functools.partial(_Quiet, directory=str(out))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request in the test output."""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with headless_chromium(tmp_path) as driver:
        yield driver


@pytest.mark.timeout(180)
def test_home_recipe_and_api_pages_render_with_navigation_and_search(
    site: str, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 20)
    browser.get(f"{site}/")
    assert "zk-recipes" in browser.title
    nav = browser.find_element(By.CSS_SELECTOR, "nav.md-nav--primary")
    for section in ("Recipes", "Frameworks", "Operations", "Evidence", "API reference"):
        assert section in nav.get_attribute("textContent")

    # Search: the index loads in a web worker; a query finds the lock page.
    browser.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
    box = wait.until(
        expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, ".md-search__input"))
    )
    box.send_keys("fencing token")
    found = wait.until(
        expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, ".md-search-result__item")
        )
    )
    assert found.is_displayed()

    browser.get(f"{site}/recipes/lock/")
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Lock")
    assert browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--secondary a")  # the page's contents
    with contextlib.suppress(Exception):
        browser.set_window_size(1400, 1000)
    shot = browser.get_screenshot_as_png()
    assert shot.startswith(b"\x89PNG")
    if os.environ.get("ZK_RECIPES_UPDATE_SCREENSHOT"):
        SCREENSHOT.write_bytes(shot)
    assert SCREENSHOT.is_file(), "the docs keep one screenshot of the site"

    browser.get(f"{site}/reference/zk_recipes/")
    lock = browser.find_element(By.ID, "zk_recipes.Lock")  # a class from its docstring
    assert "Lock" in lock.text
    assert browser.find_element(By.ID, "zk_recipes.ZkClient")
