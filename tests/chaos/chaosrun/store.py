"""The fenced store and the run's history: one sqlite file shared by every process of a chaos run.

The store stands for the resource a lock protects, and it lives outside
ZooKeeper on purpose: its only defence against a stale holder is the fencing
token. Each lock path has a table of attempts. A write runs in one
``BEGIN IMMEDIATE`` transaction (sqlite's own file lock serialises writers
across processes): it reads the highest token accepted so far for that path,
accepts the write only if its token is higher, and records the attempt either
way. The same transaction stamps the end of the critical section (the write is
its last act) and whether the worker had been told LOST by then.

The queues have a fenced store of their own, ``queue_writes``: a consumer
writes there with its claim's fencing token, and a write is accepted only if
its token is above the last one accepted *for that item*.

The file also holds the history the checker reads: ``events`` written by the
workers (leader / not_leader, lost, connection states, start and stop, puts,
deliveries, loss reports, registrations), ``faults`` written by the parent
(kills, pauses, partitions, server faults), ``snapshots`` (what the parent's
discovery observer saw) and ``queue_final`` (the queues' results, dead
letters and leftovers, read by the parent once the workers are gone).
Every time is ``time.monotonic_ns()``: CLOCK_MONOTONIC is one clock for all
processes of a Linux machine, so times from different processes compare.

WAL mode lets readers run beside the one writer; ``synchronous=NORMAL`` skips
the fsync per commit (a crash of the machine is not one of our faults).
"""

from __future__ import annotations

import contextlib
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

#: How long a writer waits for sqlite's lock (a SIGSTOPped writer can hold it for seconds).
BUSY_TIMEOUT = 120.0


def table_for(lock_path: str) -> str:
    """The attempts table of one lock path (``/locks/a`` -> ``attempts_locks_a``)."""
    return "attempts_" + re.sub(r"[^A-Za-z0-9]", "_", lock_path.strip("/"))


def connect(db_path: str | Path, *, any_thread: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, patient when busy.

    ``any_thread``: made in one thread, used in another (one at a time).
    """
    conn = sqlite3.connect(
        str(db_path),
        timeout=BUSY_TIMEOUT,
        isolation_level=None,
        check_same_thread=not any_thread,
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def create(db_path: str | Path, lock_paths: Iterable[str]) -> None:
    """Create the history file: one attempts table per lock path, events, faults."""
    conn = connect(db_path)
    try:
        for lock_path in lock_paths:
            table = table_for(lock_path)
            conn.execute(
                f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, worker TEXT NOT NULL,"
                " pid INTEGER NOT NULL, token INTEGER NOT NULL, accepted INTEGER NOT NULL,"
                " call_ns INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
                " told_lost INTEGER NOT NULL)"
            )
            conn.execute(f"CREATE INDEX {table}_fence ON {table} (accepted, token)")
        conn.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, worker TEXT NOT NULL,"
            " pid INTEGER NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL, token INTEGER,"
            " t_ns INTEGER NOT NULL, detail TEXT NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE faults (id INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
            " target TEXT NOT NULL, pid INTEGER, begin_ns INTEGER NOT NULL,"
            " end_ns INTEGER NOT NULL, detail TEXT NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE queue_writes (id INTEGER PRIMARY KEY, item TEXT NOT NULL,"
            " delivery TEXT NOT NULL, worker TEXT NOT NULL, pid INTEGER NOT NULL,"
            " token INTEGER NOT NULL, accepted INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
            " end_ns INTEGER NOT NULL, told_lost INTEGER NOT NULL)"
        )
        conn.execute("CREATE INDEX queue_writes_fence ON queue_writes (item, accepted, token)")
        # kind: result (node, item, detail = the delivery), dead (node, item, detail =
        # attempts), left (an item node still queued), claim, marker (leftover nodes).
        conn.execute(
            "CREATE TABLE queue_final (id INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
            " node TEXT NOT NULL, item TEXT NOT NULL, detail TEXT NOT NULL)"
        )
        # nodes: JSON [[name, ephemeral owner or null], ...] listed between t0 and t1.
        conn.execute(
            "CREATE TABLE snapshots (id INTEGER PRIMARY KEY, t0_ns INTEGER NOT NULL,"
            " t1_ns INTEGER NOT NULL, nodes TEXT NOT NULL)"
        )
    finally:
        conn.close()


class FencedStore:
    """The protected resource: refuses a write whose token is not above the last accepted one."""

    def __init__(self, db_path: str | Path, lock_paths: Iterable[str]) -> None:
        self._conn = connect(db_path)
        self._tables = {path: table_for(path) for path in lock_paths}

    def write(
        self,
        *,
        path: str,
        worker: str,
        pid: int,
        token: int,
        call_ns: int,
        start_ns: int,
        told_lost: Callable[[], bool],
    ) -> bool:
        """Record the attempt; True if accepted (token above every accepted one on ``path``)."""
        table = self._tables[path]
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            (last,) = conn.execute(f"SELECT MAX(token) FROM {table} WHERE accepted = 1").fetchone()
            accepted = last is None or token > last
            end_ns = time.monotonic_ns()
            lost = told_lost()
            conn.execute(
                f"INSERT INTO {table} (worker, pid, token, accepted, call_ns, start_ns, end_ns,"
                " told_lost) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (worker, pid, token, int(accepted), call_ns, start_ns, end_ns, int(lost)),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return accepted

    def close(self) -> None:
        self._conn.close()


class QueueStore:
    """The queues' fenced store, for one consumer thread (its own connection).

    A write for an item is accepted only if its token (the claim's czxid) is
    above every token accepted for that item so far; every attempt is kept.
    """

    def __init__(self, db_path: str | Path) -> None:
        self._conn = connect(db_path, any_thread=True)

    def write(
        self,
        *,
        item: str,
        delivery: str,
        worker: str,
        pid: int,
        token: int,
        start_ns: int,
        told_lost: Callable[[], bool],
    ) -> bool:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            (last,) = conn.execute(
                "SELECT MAX(token) FROM queue_writes WHERE item = ? AND accepted = 1", (item,)
            ).fetchone()
            accepted = last is None or token > last
            conn.execute(
                "INSERT INTO queue_writes (item, delivery, worker, pid, token, accepted,"
                " start_ns, end_ns, told_lost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    item,
                    delivery,
                    worker,
                    pid,
                    token,
                    int(accepted),
                    start_ns,
                    time.monotonic_ns(),
                    int(told_lost()),
                ),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return accepted

    def close(self) -> None:
        self._conn.close()


_STOP = None


class EventRecorder:
    """Stamps events at once (monotonic_ns) and writes them from a thread of its own.

    Listener threads never wait for sqlite's lock. A process killed with -9
    loses what was not written yet, which is harmless: a killed process acts no
    more, and the checker takes its end from the parent's kill record.
    """

    def __init__(self, db_path: str | Path, worker: str, pid: int) -> None:
        self._db_path = db_path
        self._worker = worker
        self._pid = pid
        self._queue: queue.SimpleQueue[tuple[str, str, int | None, int, str] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="chaos recorder", daemon=True)
        self._thread.start()

    def record(
        self,
        kind: str,
        path: str = "",
        token: int | None = None,
        detail: str = "",
        *,
        t_ns: int | None = None,
    ) -> None:
        """Queue one event, stamped now, or at ``t_ns`` (when it was decided elsewhere)."""
        self._queue.put((kind, path, token, time.monotonic_ns() if t_ns is None else t_ns, detail))

    def close(self, timeout: float = 30.0) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        conn = connect(self._db_path)
        try:
            while True:
                batch = [self._queue.get()]
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                rows = [(self._worker, self._pid, *item) for item in batch if item is not _STOP]
                if rows:
                    with _transaction(conn):
                        conn.executemany(
                            "INSERT INTO events (worker, pid, kind, path, token, t_ns, detail)"
                            " VALUES (?, ?, ?, ?, ?, ?, ?)",
                            rows,
                        )
                if _STOP in batch:
                    return
        finally:
            conn.close()


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def record_fault(
    conn: sqlite3.Connection,
    kind: str,
    target: str,
    pid: int | None,
    begin_ns: int,
    end_ns: int,
    detail: str = "",
) -> None:
    """The parent's record of one fault (its connection, one short transaction)."""
    with _transaction(conn):
        conn.execute(
            "INSERT INTO faults (kind, target, pid, begin_ns, end_ns, detail)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (kind, target, pid, begin_ns, end_ns, detail),
        )


def record_final(conn: sqlite3.Connection, rows: Iterable[tuple[str, str, str, str]]) -> None:
    """The parent's record of the queues' end state: (kind, node, item, detail) rows."""
    with _transaction(conn):
        conn.executemany(
            "INSERT INTO queue_final (kind, node, item, detail) VALUES (?, ?, ?, ?)", rows
        )


def record_snapshot(conn: sqlite3.Connection, t0_ns: int, t1_ns: int, nodes: str) -> None:
    """One listing of the observed service (nodes as JSON), made between t0 and t1."""
    with _transaction(conn):
        conn.execute(
            "INSERT INTO snapshots (t0_ns, t1_ns, nodes) VALUES (?, ?, ?)", (t0_ns, t1_ns, nodes)
        )
