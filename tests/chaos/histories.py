"""Hand-made histories for the checker's tests: write rows as the workers and the parent would.

Times are given in seconds and stored as ns; a history file is made by
``history`` (the ``db`` fixture of each checker test module).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .chaosrun.store import connect, create, record_fault, record_final, record_snapshot

PATHS = ("/locks/a", "/locks/b")
S = 1_000_000_000  # one second in ns


def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite"
    create(path, PATHS)
    return path


def event(
    db: Path,
    worker: str,
    pid: int,
    kind: str,
    t: float,
    *,
    path: str = "",
    token: int | None = None,
    detail: str = "",
) -> None:
    conn = connect(db)
    try:
        conn.execute(
            "INSERT INTO events (worker, pid, kind, path, token, t_ns, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (worker, pid, kind, path, token, int(t * S), detail),
        )
    finally:
        conn.close()


def fault(db: Path, kind: str, target: str, pid: int | None, begin: float, end: float) -> None:
    conn = connect(db)
    try:
        record_fault(conn, kind, target, pid, int(begin * S), int(end * S))
    finally:
        conn.close()


def pause(db: Path, worker: str, pid: int, begin: float, end: float) -> None:
    fault(db, "pause_worker", worker, pid, begin, end)


def final(db: Path, kind: str, node: str, item: str = "", detail: str = "") -> None:
    conn = connect(db)
    try:
        record_final(conn, [(kind, node, item, detail)])
    finally:
        conn.close()


def store_write(
    db: Path,
    item: str,
    delivery: str,
    token: int,
    end: float,
    *,
    accepted: bool = True,
    told_lost: bool = False,
    pid: int = 10,
) -> None:
    conn = connect(db)
    try:
        conn.execute(
            "INSERT INTO queue_writes (item, delivery, worker, pid, token, accepted, start_ns,"
            " end_ns, told_lost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                item,
                delivery,
                delivery.split("/")[0],
                pid,
                token,
                int(accepted),
                int(end * S) - 1,
                int(end * S),
                int(told_lost),
            ),
        )
    finally:
        conn.close()


def snapshot(db: Path, t0: float, t1: float, nodes: Sequence[tuple[str, int | None]]) -> None:
    conn = connect(db)
    try:
        record_snapshot(conn, int(t0 * S), int(t1 * S), json.dumps(nodes))
    finally:
        conn.close()
