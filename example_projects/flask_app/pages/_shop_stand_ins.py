"""Stand-ins for the shop code that docs/integrations/flask.md's examples call.

The page shows locks around calls like ``send_mail(...)``, ``ledger.close(...)``
or ``get_db()``; here they are small and real (a list of sent mail, an
in-memory ledger that checks fencing tokens, an sqlite database), so that
every example runs as written (tests/integrations/flask/test_flask_page.py
runs them all).

``Pause`` is the one thing a shop would not have: a point inside the work
where a test keeps a request waiting, so that it can act (send a second
request, expire the session) while the first holds its lock. Unarmed, as in
real use, it costs nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from flask import Flask, current_app, g, request
from werkzeug.local import LocalProxy

#: The longest a paused request waits for its test: a failed test never hangs on it.
PAUSE_SECONDS = 30.0


class Pause:
    """Where a test may keep the shop's work waiting: ``with pause.armed() as entered:``.

    While armed, each ``pause()`` call sets ``entered`` and waits until the
    block ends; unarmed it returns at once.
    """

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._go: threading.Event | None = None

    def __call__(self) -> None:
        go = self._go
        if go is None:
            return
        self.entered.set()
        go.wait(PAUSE_SECONDS)

    @contextlib.contextmanager
    def armed(self) -> Iterator[threading.Event]:
        go = threading.Event()
        self.entered.clear()
        self._go = go
        try:
            yield self.entered
        finally:
            self._go = None
            go.set()


#: Paused by the tests inside the views' work (sending mail, rendering a PDF).
pause = Pause()


class Mailer:
    """Sends mail: keeps it in ``sent``."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, message: str) -> None:
        pause()
        self.sent.append(message)


class Counter:
    """Work that only counts its runs (an export, a search index rebuild, a rates refresh)."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> None:
        pause()
        self.runs += 1


class Reports:
    """Builds reports, and keeps the last one of each for when ZooKeeper is down."""

    def __init__(self) -> None:
        self.cache: dict[int, str] = {}

    def build(self, id: int) -> str:
        report = f"report {id}, built #{len(self.cache) + 1}"
        self.cache[id] = report
        return report

    def cached(self, id: int) -> str:
        return self.cache.get(id, f"report {id} is being built, come back later")


class StaleToken(Exception):
    """The ledger refused a write: a newer lock holder has written since."""


class Ledger:
    """Month closings, refusing a fencing token older than the newest it has seen."""

    def __init__(self) -> None:
        self.newest_token = 0
        self.closed: dict[str, int] = {}

    def close(self, month: str, fencing_token: int) -> None:
        if fencing_token < self.newest_token:
            raise StaleToken(f"token {fencing_token} < {self.newest_token}: overtaken")
        self.newest_token = fencing_token
        self.closed[month] = fencing_token


# -- the database: Flask's tutorial's get_db(), on the app's DATABASE file ---------------------


def get_db() -> sqlite3.Connection:
    """The request's connection to ``app.config["DATABASE"]``, closed with the app context."""
    if "db" not in g:
        g.db = sqlite3.connect(current_app.config["DATABASE"])
    return cast(sqlite3.Connection, g.db)


def close_db(exc: BaseException | None = None) -> None:
    db = g.pop("db", None)
    if db is not None:
        db.close()


def init_db(app: Flask) -> None:
    """Create the invoice table (each invoice with its fence: the newest token written)."""
    with contextlib.closing(sqlite3.connect(app.config["DATABASE"])) as db, db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS invoice ("
            " id INTEGER PRIMARY KEY, status TEXT NOT NULL, fence INTEGER NOT NULL DEFAULT 0)"
        )
    app.teardown_appcontext(close_db)


# -- who is asking: flask-login's current_user, from HTTP basic auth here --------------------


@dataclass(frozen=True)
class User:
    name: str
    is_staff: bool


STAFF = frozenset({"ada"})


def _user_of_the_request() -> User:
    auth = request.authorization
    name = auth.username if auth is not None and auth.username else "anonymous"
    return User(name, is_staff=name in STAFF)


current_user = cast(User, LocalProxy(_user_of_the_request))
