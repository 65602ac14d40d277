"""Stand-ins for the shop's own code that docs/integrations/django.md's examples call.

Small and quick, so every example runs as the page shows it
(tests/integrations/django/test_django_page.py runs them all).
"""

from __future__ import annotations

import threading
from typing import Any

from django.http import HttpRequest, HttpResponse


class FencedLog:
    """Entries written with a fencing token; an older token than one seen is refused."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.entries: list[tuple[Any, int]] = []
        self.highest = 0

    def append(self, entry: Any, fencing_token: int) -> None:
        with self._guard:
            if fencing_token < self.highest:
                raise RuntimeError(f"stale fencing token {fencing_token} < {self.highest}")
            self.highest = fencing_token
            self.entries.append((entry, fencing_token))


class Ledger(FencedLog):
    """The books: a month is closed once, under the lock of that month."""

    def close(self, month: str, fencing_token: int) -> None:
        self.append(("closed", month), fencing_token)


ledger = Ledger()
audit_log = FencedLog()
sent: list[int] = []
reports_built: list[str] = []
exports_run: list[str] = []
rates_refreshed: list[str] = []


def cached_report(request: HttpRequest, pk: int) -> HttpResponse:
    """The last report built, served while ZooKeeper cannot be reached."""
    return HttpResponse(f"report {pk} (cached)", status=200)


def build_report() -> None:
    reports_built.append("report")


def run_export() -> None:
    exports_run.append("export")


async def refresh() -> None:
    rates_refreshed.append("rates")
