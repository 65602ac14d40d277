"""The asyncio tests' fixture: ``loop``, the kind of event loop a test runs on (loops.py)."""

from __future__ import annotations

import pytest

from tests.aio.loops import LOOPS


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    """A test that takes it runs on asyncio's loop and on uvloop's (``run_on(loop, main())``)."""
    return str(request.param)
