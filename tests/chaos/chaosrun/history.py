"""The history's rows as the checkers read them: sections, events, faults, and the pauses.

``load`` reads the lock sections (one attempts table per lock path), the
events in time order and the faults by start; ``Pauses`` answers whether a
process was SIGSTOPped at some time in an interval (what the checks exempt).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from .store import connect, table_for


@dataclasses.dataclass(frozen=True)
class Section:
    #: Row id in its path's table (unique per path only).
    id: int
    path: str
    worker: str
    pid: int
    token: int
    accepted: bool
    call_ns: int
    start_ns: int
    end_ns: int
    told_lost: bool


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    target: str
    pid: int | None
    begin_ns: int
    end_ns: int


@dataclasses.dataclass(frozen=True)
class Event:
    worker: str
    pid: int
    kind: str
    path: str
    token: int | None
    t_ns: int
    detail: str


class Pauses:
    def __init__(self, faults: Iterable[Fault]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for fault in faults:
            if fault.kind == "pause_worker" and fault.pid is not None:
                self._by_pid[fault.pid].append((fault.begin_ns, fault.end_ns))

    def during(self, pid: int, begin_ns: int, end_ns: int) -> bool:
        """True if ``pid`` was stopped at some time in [begin_ns, end_ns]."""
        return any(b <= end_ns and e >= begin_ns for b, e in self._by_pid.get(pid, ()))

    def first_start_in(self, pid: int, begin_ns: int, end_ns: int) -> int | None:
        starts = [b for b, _ in self._by_pid.get(pid, ()) if begin_ns <= b <= end_ns]
        return min(starts) if starts else None


def load(
    db_path: str | Path, lock_paths: Iterable[str]
) -> tuple[list[Section], list[Event], list[Fault]]:
    conn = connect(db_path)
    try:
        sections = [
            Section(
                id=row[0],
                path=path,
                worker=row[1],
                pid=row[2],
                token=row[3],
                accepted=bool(row[4]),
                call_ns=row[5],
                start_ns=row[6],
                end_ns=row[7],
                told_lost=bool(row[8]),
            )
            for path in lock_paths
            for row in conn.execute(
                "SELECT id, worker, pid, token, accepted, call_ns, start_ns, end_ns, told_lost"
                f" FROM {table_for(path)} ORDER BY id"
            )
        ]
        events = [
            Event(*row)
            for row in conn.execute(
                "SELECT worker, pid, kind, path, token, t_ns, detail FROM events ORDER BY t_ns"
            )
        ]
        faults = [
            Fault(*row)
            for row in conn.execute(
                "SELECT kind, target, pid, begin_ns, end_ns FROM faults ORDER BY begin_ns"
            )
        ]
    finally:
        conn.close()
    return sections, events, faults


__all__ = ["Event", "Fault", "Pauses", "Section", "load"]
