"""A real browser for the tests that need one: Debian's chromium, headless, through its driver."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@contextlib.contextmanager
def headless_chromium(tmp_path: Path) -> Iterator[Any]:
    """Headless chromium through Debian's chromedriver (Selenium Manager never runs).

    Skips the test when they are not installed (scripts/bootstrap.sh installs them).
    """
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            f"needs Debian's chromium and chromedriver ({CHROMIUM}, {CHROMEDRIVER}): "
            "scripts/bootstrap.sh installs them"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(10)
    try:
        yield driver
    finally:
        driver.quit()
