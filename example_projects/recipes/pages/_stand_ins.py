"""Stand-ins for the application code the recipe pages call (your storage, your work).

The pages show a recipe around calls like ``storage.write(...)`` or
``serve_forever()``; here they are small and quick, so that every page's
example runs as written (tests/test_recipe_pages.py runs them all).
"""

from __future__ import annotations

import threading
import time
from typing import Any


class Storage:
    """A store that refuses a write whose fencing token is older than one it has seen."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.highest = 0
        self.data: Any = None

    def write(self, data: Any, fencing_token: int | None = None, **_: Any) -> None:
        with self._guard:
            if fencing_token is not None:
                if fencing_token < self.highest:
                    raise RuntimeError(f"stale token {fencing_token} < {self.highest}")
                self.highest = fencing_token
            self.data = data

    def read(self) -> Any:
        return self.data


def work(*_: Any, **__: Any) -> None:
    """Any piece of the application's own work: quick here."""
    time.sleep(0.01)
