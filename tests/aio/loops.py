"""The event loops the asyncio API is tested on: asyncio's own, and uvloop's.

``run_on(loop, main())`` runs a coroutine to its end on a fresh loop of that
kind, as ``asyncio.run`` does (uvloop: where it is installed, else skipped).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

LOOPS = ("asyncio", "uvloop")


def run_on(loop: str, main: Coroutine[Any, Any, T]) -> T:
    if loop == "asyncio":
        return asyncio.run(main)
    try:
        import uvloop
    except ImportError:
        main.close()
        pytest.skip("uvloop is not installed")
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    new_loop = uvloop.new_event_loop()  # Python 3.10: asyncio.run's steps by hand
    try:
        return new_loop.run_until_complete(main)
    finally:
        new_loop.run_until_complete(new_loop.shutdown_asyncgens())
        new_loop.close()
