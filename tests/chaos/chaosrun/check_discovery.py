"""The discovery checker: what the observer saw against what the workers held.

From the history: the workers' registration calls (``sd_reg`` when made,
``sd_reg_ok`` / ``sd_reg_err`` when returned, ``sd_unreg`` and ``sd_close``
when made), their connection states, the kills, pauses and server faults,
and the observer's snapshots (``discovery.Observer``: a node listed had not
been deleted before the snapshot began; a node missing was absent at some
moment while it ran).

Each registration of an id *may be visible* from its ``register`` call until
``ghost_bound`` after its end (unregister or close called, register failed,
or the worker killed): the 66% of the session timeout a client may take to
give its session up, then the session timeout the server takes to expire
it, and two ticks. A server fault (restart, leader kill, isolated follower)
that overlaps that window pushes its end to ``ghost_bound`` after the
fault: a new leader gives every session a fresh timeout. It is *held* from
``register``'s return until its end.

Must be zero:

- ``ghosts``: ids seen in a snapshot that lies wholly outside every window
  in which they may be visible.
- ``absences``: an id missing from a snapshot begun more than one session
  timeout after its worker held it registered *and* was connected (CONNECTED
  or RECONNECTED, no SUSPENDED or LOST since), with that process never
  frozen meanwhile (a SIGSTOPped process cannot notice its session's end).
- ``duplicates``: two nodes of one DYNAMIC_SEQUENTIAL id in one snapshot,
  either of one session (one registration made twice) or still both there
  ``ghost_bound`` after the newer one was first seen.
- ``leftovers`` (measured by the run): instances left once every worker is gone.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .discovery import instance_of
from .history import Event, Fault, Pauses
from .store import connect

_EXAMPLES = 5
#: Faults of the ensemble itself: during and after them, sessions get a fresh timeout.
_SERVER_FAULTS = ("restart_server", "kill_leader", "isolate_follower")
_CONNECTED = ("CONNECTED", "RECONNECTED", "READ_ONLY")


@dataclasses.dataclass
class Registration:
    id: str
    worker: str
    type: str
    call_ns: int
    ok_ns: int | None = None
    end_ns: int | None = None
    failed: bool = False


@dataclasses.dataclass(frozen=True)
class Snapshot:
    t0_ns: int
    t1_ns: int
    #: id -> [(node, ephemeral owner or None)]
    ids: dict[str, list[tuple[str, int | None]]]


def _snapshots(db_path: str | Path) -> list[Snapshot]:
    conn = connect(db_path)
    try:
        rows = list(conn.execute("SELECT t0_ns, t1_ns, nodes FROM snapshots ORDER BY t0_ns"))
    finally:
        conn.close()
    found = []
    for t0, t1, nodes in rows:
        ids: dict[str, list[tuple[str, int | None]]] = defaultdict(list)
        for name, owner in json.loads(nodes):
            ids[instance_of(name)].append((name, owner))
        found.append(Snapshot(t0, t1, dict(ids)))
    return found


class _Windows:
    """End of a "may be visible" window, pushed on by server faults (module note)."""

    def __init__(self, faults: list[Fault], bound_ns: int) -> None:
        self._server = sorted((f.begin_ns, f.end_ns) for f in faults if f.kind in _SERVER_FAULTS)
        self.bound_ns = bound_ns

    def deadline(self, end_ns: int) -> int:
        deadline = end_ns + self.bound_ns
        for begin, end in self._server:
            if begin > deadline:
                break
            if end >= end_ns:
                deadline = max(deadline, end + self.bound_ns)
        return deadline


class _Connections:
    """Each worker's connected runs, from its state events."""

    def __init__(self, events: list[Event]) -> None:
        self._changes: dict[str, list[tuple[int, bool]]] = defaultdict(list)
        for event in events:
            if event.kind == "state":
                self._changes[event.worker].append((event.t_ns, event.detail in _CONNECTED))
        self._times = {w: [t for t, _ in changes] for w, changes in self._changes.items()}

    def since(self, worker: str, t_ns: int) -> int | None:
        """When the connected run holding ``t_ns`` began (None: not connected then)."""
        changes = self._changes.get(worker, [])
        index = bisect.bisect_right(self._times.get(worker, []), t_ns) - 1
        if index < 0 or not changes[index][1]:
            return None
        while index > 0 and changes[index - 1][1]:
            index -= 1
        return changes[index][0]


def _registrations(events: list[Event], killed: dict[str, int]) -> dict[str, list[Registration]]:
    by_id: dict[str, list[Registration]] = defaultdict(list)
    open_: dict[str, Registration] = {}
    for event in events:
        kind, key = event.kind, event.path
        if kind == "sd_reg":
            registration = Registration(key, event.worker, event.detail, event.t_ns)
            by_id[key].append(registration)
            open_[key] = registration
        elif kind == "sd_reg_ok" and key in open_:
            open_[key].ok_ns = event.t_ns
        elif kind in ("sd_reg_err", "sd_unreg", "sd_close") and key in open_:
            registration = open_.pop(key)
            registration.end_ns = event.t_ns
            registration.failed = kind == "sd_reg_err"
    for registration in open_.values():  # held to the end, or until its worker was killed
        registration.end_ns = killed.get(registration.worker)
    return by_id


def check_discovery(
    db_path: str | Path,
    events: list[Event],
    faults: list[Fault],
    pauses: Pauses,
    *,
    ghost_bound: float,
    session_timeout: float,
) -> dict[str, Any]:
    snapshots = _snapshots(db_path)
    killed = {f.target: f.begin_ns for f in faults if f.kind == "kill_worker"}
    windows = _Windows(faults, int(ghost_bound * 1e9))
    by_id = _registrations(events, killed)
    pids = {e.worker: e.pid for e in events}
    connections = _Connections(events)
    timeout_ns = int(session_timeout * 1e9)
    forever = 1 << 62

    # Per id, its registrations by call (they follow each other), and the running maximum
    # of their windows' ends: a snapshot overlaps some window iff the largest end among
    # the windows begun by its end reaches its start.
    calls = {key: [r.call_ns for r in rs] for key, rs in by_id.items()}
    reach: dict[str, list[int]] = {}
    for key, registrations in by_id.items():
        ends, top = [], 0
        for r in registrations:
            top = max(top, forever if r.end_ns is None else windows.deadline(r.end_ns))
            ends.append(top)
        reach[key] = ends
    ghosts: dict[str, str] = {}
    exempt_server = 0
    duplicates: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    after_release = 0
    for snap in snapshots:
        for key, nodes in snap.ids.items():
            for node, _ in nodes:
                first_seen.setdefault(node, snap.t1_ns)
            index = bisect.bisect_right(calls.get(key, []), snap.t1_ns) - 1
            last = by_id[key][index] if index >= 0 else None
            if last is not None:
                reaches = reach[key][index]
            else:  # no registration recorded: a killed worker's last moments at most
                worker = key.rsplit("-", 1)[0]
                reaches = windows.deadline(killed[worker]) if worker in killed else -1
            if reaches < snap.t0_ns:
                ghosts.setdefault(key, f"{nodes} seen at {snap.t0_ns}..{snap.t1_ns}")
            elif last is not None and last.end_ns is not None and not last.failed:
                if last.end_ns < snap.t0_ns:
                    after_release = max(after_release, snap.t0_ns - last.end_ns)
                exempt_server += last.end_ns + windows.bound_ns < snap.t0_ns
            if len(nodes) > 1:
                owners = [owner for _, owner in nodes if owner is not None]
                newest = max(name for name, _ in nodes)
                if len(owners) != len(set(owners)):
                    duplicates.setdefault(key, f"one session: {nodes} at {snap.t0_ns}")
                elif snap.t0_ns > windows.deadline(first_seen[newest]):
                    duplicates.setdefault(key, f"both still there: {nodes} at {snap.t0_ns}")

    # Absences: each registration against the snapshots begun while it was held.
    starts = [snap.t0_ns for snap in snapshots]
    absences: list[str] = []
    absent_max = exempt_paused = 0
    for key, registrations in by_id.items():
        for r in registrations:
            if r.ok_ns is None:
                continue
            end = forever if r.end_ns is None else r.end_ns
            pid = pids.get(r.worker)
            for snap in snapshots[bisect.bisect_right(starts, r.ok_ns) :]:
                if snap.t1_ns >= end:
                    break
                if key in snap.ids:
                    continue
                c0 = connections.since(r.worker, snap.t1_ns)
                if c0 is None or connections.since(r.worker, snap.t0_ns) != c0:
                    continue  # not connected all along
                since = max(r.ok_ns, c0)
                if pid is not None and pauses.during(pid, since, snap.t1_ns):
                    exempt_paused += 1
                    continue
                absent_max = max(absent_max, snap.t0_ns - since)
                if snap.t0_ns - since > timeout_ns:
                    absences.append(
                        f"{key} ({r.worker}) held since {r.ok_ns}, connected since {c0}, "
                        f"missing at {snap.t0_ns}..{snap.t1_ns}"
                    )
                    break  # one per registration

    registrations = [r for rs in by_id.values() for r in rs]
    return {
        "ghosts": len(ghosts),
        "ghost_examples": list(ghosts.values())[:_EXAMPLES],
        "absences": len(absences),
        "absence_examples": absences[:_EXAMPLES],
        "duplicates": len(duplicates),
        "duplicate_examples": list(duplicates.values())[:_EXAMPLES],
        # At work:
        "instances": len(by_id),
        "registrations": dict(Counter(r.type for r in registrations)),
        "register_errors": sum(1 for r in registrations if r.failed),
        "unregisters": sum(1 for e in events if e.kind == "sd_unreg"),
        "closed_by_close": sum(1 for e in events if e.kind == "sd_close"),
        "updates": sum(1 for e in events if e.kind == "sd_upd"),
        "errors": sum(1 for e in events if e.kind == "sd_error"),
        "snapshots": len(snapshots),
        "visible_after_release_max_s": round(after_release / 1e9, 2),
        "ghosts_exempt_server_fault": exempt_server,
        "absent_while_held_max_s": round(absent_max / 1e9, 2),
        "absences_exempt_paused": exempt_paused,
        "ghost_bound_s": ghost_bound,
    }
