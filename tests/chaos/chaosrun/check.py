"""The checker: reads a chaos run's history and turns it into figures (a JSON-able dict).

Figures that must be zero:

- ``locks.overlaps``: two critical sections on one path overlapping in time,
  neither holder told LOST yet. A section runs from acquire's return to its
  write, cut short at its LOST notification. Sections of a process that was
  SIGSTOPped while waiting for or holding the lock are counted apart
  (``overlaps_paused_exempt``): a frozen process cannot be told anything, and
  only fencing protects the store from it.
- ``locks.stale_writes_accepted``: an accepted write whose token is not above
  every token accepted before it on that path (commit order). The store
  refuses those by construction; ``stale_writes_refused`` shows fencing at work.
- ``locks.lost_after_next_holder``: a LOST notification stamped after the next
  holder's section began, for a process that was not SIGSTOPped in between.
- ``leadership.overlaps``: two processes inside leadership at once, each
  counted from is_leader to the first of not_leader, LOST, closing or its kill.
  A SIGSTOP ends the checked part of a term; what the process believed after
  waking is reported as ``overlaps_paused_exempt``.
- orphans (measured by the run, not here).

Figures that show the faults at work, among others:

- ``faults``: fault rows by kind; ``faults_overlapping``: pairs of faults whose
  times overlap, as ``"first+second"`` by start (the overlapping kinds of the
  schedule, seen from the history);
- ``partitions``: for each partition kind, how many there were, how many
  churn notifications their targets heard while cut off (only a
  ``drop_requests`` target should hear any), and how long after the cut each
  target was told LOST (``told_lost_after_s``; ``not_told_lost`` when not
  before the heal). No bound is asserted on these times: the orderings above
  are what must hold, these say how close they came.

Times are ``time.monotonic_ns()`` from one system-wide clock. Each side is
stamped a little after the fact (a holder's start when acquire returns, a
notification when its callback runs), so the orderings compared are the ones
the processes observed; no tolerance is added.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .check_discovery import check_discovery
from .check_queues import check_queues
from .config import PARTITIONS
from .history import Event, Fault, Pauses, Section, load

_EXAMPLES = 5

#: The figures that must be zero, by the report's section (a family not run has none).
MUST_BE_ZERO = (
    ("locks", "overlaps"),
    ("locks", "stale_writes_accepted"),
    ("locks", "refused_unexplained"),
    ("locks", "lost_after_next_holder"),
    ("leadership", "overlaps"),
    ("queues", "items_lost"),
    ("queues", "leftovers"),
    ("queues", "commits_told_lost"),
    ("queues", "duplicates_unexplained"),
    ("queues", "dead_letters_unexpected"),
    ("queues", "poison_not_dead_once"),
    ("queues", "puts_failed_but_applied"),
    ("queues", "stale_writes_accepted"),
    ("queues", "committed_not_fenced_last"),
    ("queues", "writes_after_newer_claim_unwarned"),
    ("discovery", "ghosts"),
    ("discovery", "absences"),
    ("discovery", "duplicates"),
    ("discovery", "leftovers"),
)


def off_figures(report: dict[str, Any]) -> list[str]:
    """The must-be-zero figures that are not zero (and ``orphans``)."""
    bad = [
        f"{section}.{name}"
        for section, name in MUST_BE_ZERO
        if section in report and report[section][name]
    ]
    return bad + (["orphans"] if report["orphans"] else [])


def check(
    db_path: str | Path,
    lock_paths: Iterable[str],
    *,
    families: Iterable[str] = ("locks",),
    ghost_bound: float = 2.5 * 1.66 + 0.4,
    session_timeout: float = 2.5,
    max_attempts: int = 3,
) -> dict[str, Any]:
    """The figures of the ``families`` run (``locks``, ``queues``, ``discovery``)."""
    paths = tuple(lock_paths)
    families = tuple(families)
    sections, events, faults = load(db_path, paths)
    pauses = Pauses(faults)
    report: dict[str, Any] = {
        "acquisitions": len(sections),
        "acquisitions_by_path": dict(Counter(s.path for s in sections)),
    }
    if "locks" in families:
        report["locks"] = _check_locks(paths, sections, events, pauses)
        report["leadership"] = _check_leadership(events, faults, pauses)
    if "queues" in families:
        report["queues"] = check_queues(db_path, events, faults, pauses, max_attempts=max_attempts)
    if "discovery" in families:
        report["discovery"] = check_discovery(
            db_path,
            events,
            faults,
            pauses,
            ghost_bound=ghost_bound,
            session_timeout=session_timeout,
        )
    return report | {
        "faults": dict(Counter(f.kind for f in faults)),
        "faults_overlapping": _overlapping(faults),
        "partitions": _check_partitions(events, faults),
        "churn_notifications": sum(1 for e in events if e.kind == "notified"),
        "acquire_errors": sum(1 for e in events if e.kind == "acquire_error"),
        "release_errors": sum(1 for e in events if e.kind == "release_error"),
    }


def _describe(section: Section) -> str:
    return (
        f"{section.path} {section.worker} pid={section.pid} token={section.token} "
        f"accepted={section.accepted} call={section.call_ns} start={section.start_ns} "
        f"end={section.end_ns} told_lost={section.told_lost}"
    )


def _check_locks(
    paths: tuple[str, ...], sections: list[Section], events: list[Event], pauses: Pauses
) -> dict[str, Any]:
    lost_at: dict[tuple[str, str, int], int] = {}
    lost_events = [e for e in events if e.kind == "lost"]
    for event in lost_events:
        if event.token is not None:
            key = (event.worker, event.path, event.token)
            lost_at[key] = min(lost_at.get(key, event.t_ns), event.t_ns)
    paused = {(s.path, s.id): pauses.during(s.pid, s.call_ns, s.end_ns) for s in sections}

    overlaps = exempt = 0
    examples: list[str] = []
    for path in paths:
        on_path = sorted((s for s in sections if s.path == path), key=lambda s: s.start_ns)
        active: list[tuple[int, Section]] = []
        for section in on_path:
            end = min(section.end_ns, lost_at.get((section.worker, path, section.token), 1 << 62))
            active = [(e, s) for e, s in active if e > section.start_ns]
            for _, other in active:
                if paused[section.path, section.id] or paused[other.path, other.id]:
                    exempt += 1
                else:
                    overlaps += 1
                    if len(examples) < _EXAMPLES:
                        examples.append(f"{_describe(other)} || {_describe(section)}")
            if end > section.start_ns:
                active.append((end, section))

    stale_accepted = 0
    for path in paths:
        best = None
        for section in (s for s in sections if s.path == path and s.accepted):  # commit order
            if best is not None and section.token <= best:
                stale_accepted += 1
            best = section.token if best is None else max(best, section.token)
    refused = [s for s in sections if not s.accepted]

    by_token = {
        path: sorted((s for s in sections if s.path == path), key=lambda s: s.token)
        for path in paths
    }
    tokens = {path: [s.token for s in ordered] for path, ordered in by_token.items()}
    by_key = {(s.worker, s.path, s.token): s for s in sections}
    first = after = after_paused = no_successor = unmatched = 0
    late: list[str] = []
    for (worker, path, token), t_lost in lost_at.items():
        ordered = by_token.get(path, [])
        index = bisect.bisect_right(tokens.get(path, []), token)
        if index >= len(ordered):
            no_successor += 1
            continue
        successor = ordered[index]
        if t_lost < successor.start_ns:
            first += 1
            continue
        own = by_key.get((worker, path, token))
        if own is None:
            unmatched += 1
        pid = own.pid if own is not None else _pid_of(events, worker)
        since = own.call_ns if own is not None else successor.call_ns
        if pid is not None and pauses.during(pid, since, t_lost):
            after_paused += 1
        else:
            after += 1
            if len(late) < _EXAMPLES:
                late.append(
                    f"{worker} told LOST on {path} token={token} at {t_lost}, after "
                    f"{_describe(successor)}"
                )
    return {
        "overlaps": overlaps,
        "overlap_examples": examples,
        "overlaps_paused_exempt": exempt,
        "stale_writes_accepted": stale_accepted,
        "stale_writes_refused": len(refused),
        "refused_told_lost": sum(1 for s in refused if s.told_lost),
        "refused_paused": sum(1 for s in refused if paused[s.path, s.id] and not s.told_lost),
        "refused_unexplained": sum(
            1 for s in refused if not paused[s.path, s.id] and not s.told_lost
        ),
        "writes_told_lost": sum(1 for s in sections if s.told_lost),
        "writes_told_lost_accepted": sum(1 for s in sections if s.told_lost and s.accepted),
        "sections_paused": sum(paused.values()),
        "lost_notifications": len(lost_events),
        "lost_before_next_holder": first,
        "lost_after_next_holder": after,
        "lost_after_next_holder_examples": late,
        "lost_after_next_holder_paused": after_paused,
        "lost_without_next_holder": no_successor,
        "lost_without_own_write": unmatched,
    }


def _pid_of(events: list[Event], worker: str) -> int | None:
    return next((e.pid for e in events if e.worker == worker), None)


def _overlapping(faults: list[Fault]) -> dict[str, int]:
    """Pairs of faults whose times overlap, by kind, the earlier start first."""
    pairs: Counter[str] = Counter()
    ordered = sorted(faults, key=lambda f: f.begin_ns)
    for index, fault in enumerate(ordered):
        for later in ordered[index + 1 :]:
            if later.begin_ns >= fault.end_ns:
                break  # sorted by start: no later fault starts inside this one either
            pairs[f"{fault.kind}+{later.kind}"] += 1
    return dict(sorted(pairs.items()))


def _check_partitions(events: list[Event], faults: list[Fault]) -> dict[str, Any]:
    """Per partition kind: what its targets heard while cut off, and when they were told LOST."""
    by_worker: dict[str, list[Event]] = defaultdict(list)
    for event in events:  # in time order
        if event.kind == "notified" or (event.kind == "state" and event.detail == "LOST"):
            by_worker[event.worker].append(event)
    figures: dict[str, dict[str, Any]] = {}
    for fault in faults:
        if fault.kind not in PARTITIONS:
            continue
        entry = figures.setdefault(
            fault.kind,
            {
                "faults": 0,
                "notifications": 0,
                "heard_notifications": 0,
                "told_lost_after_s": [],
                "not_told_lost": 0,
            },
        )
        during = [e for e in by_worker[fault.target] if fault.begin_ns <= e.t_ns <= fault.end_ns]
        heard = sum(1 for e in during if e.kind == "notified")
        lost = next((e.t_ns for e in during if e.kind == "state"), None)
        entry["faults"] += 1
        entry["notifications"] += heard
        entry["heard_notifications"] += int(heard > 0)
        if lost is None:
            entry["not_told_lost"] += 1
        else:
            entry["told_lost_after_s"].append(round((lost - fault.begin_ns) / 1e9, 2))
    for entry in figures.values():
        entry["told_lost_after_s"].sort()
    return dict(sorted(figures.items()))


def _check_leadership(events: list[Event], faults: list[Fault], pauses: Pauses) -> dict[str, Any]:
    killed = {f.target: f.begin_ns for f in faults if f.kind == "kill_worker"}
    run_end = max((e.t_ns for e in events), default=0)
    by_worker: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_worker[event.worker].append(event)
    # (start, end, worker, exempt)
    parts: list[tuple[int, int, str, bool]] = []
    terms = 0
    for worker, mine in by_worker.items():
        pid = mine[0].pid
        start: int | None = None
        ends: list[tuple[int, int]] = []
        closed = False
        for event in mine:
            if closed:
                break
            ending = event.kind in ("not_leader", "closing") or (
                event.kind == "state" and event.detail in ("LOST", "SUSPENDED")
            )
            if event.kind == "leader" and start is None:
                start = event.t_ns
            elif ending and start is not None:
                ends.append((start, event.t_ns))
                start = None
            closed = event.kind == "closing"
        if start is not None:
            ends.append((start, killed.get(worker, run_end)))
        for begin, end in ends:
            terms += 1
            stop = pauses.first_start_in(pid, begin, end)
            if stop is None:
                parts.append((begin, end, worker, False))
            else:
                parts.append((begin, stop, worker, False))
                parts.append((stop, end, worker, True))
    parts.sort()
    overlaps = exempt = 0
    examples: list[str] = []
    active: list[tuple[int, int, str, bool]] = []
    for part in parts:
        begin, _, worker, is_exempt = part
        active = [a for a in active if a[1] > begin]
        for other in active:
            if other[2] == worker:
                continue
            if is_exempt or other[3]:
                exempt += 1
            else:
                overlaps += 1
                if len(examples) < _EXAMPLES:
                    examples.append(f"{other} || {part}")
        active.append(part)
    return {
        "terms": terms,
        "leaders": len({worker for _, _, worker, _ in parts}),
        "overlaps": overlaps,
        "overlap_examples": examples,
        "overlaps_paused_exempt": exempt,
    }


__all__ = ["MUST_BE_ZERO", "Event", "Fault", "Section", "check", "load", "off_figures"]
