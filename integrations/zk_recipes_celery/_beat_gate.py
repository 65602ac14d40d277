"""The beat gate: one decision per due entry, and the ``@leader_only`` hooks in Celery's scheduler.

Celery's ``Scheduler.tick`` asks ``is_due(entry)``, then for a due entry
advances it (``reserve``: ``last_run_at`` moves on) and calls ``apply_entry``.
The role of this beat is decided once per entry, in ``is_due``, before the
entry advances (``decide``):

- role unknown (joining, or the connection SUSPENDED): the entry is "not due,
  look again in UNKNOWN_ROLE_POLL s", so it does not advance and whoever turns
  out to lead sends it, late rather than never;
- leader or standby: the decision is kept for the ``apply_entry`` that follows,
  which sends or drops on it without asking again. Asking twice lost ticks: a
  SUSPENDED blip between the two answers dropped an entry that had already
  advanced, so nobody sent it for that period.

``celery.beat.Scheduler.is_due`` and ``apply_entry`` are wrapped so that any
scheduler (PersistentScheduler, django-celery-beat's DatabaseScheduler, ...)
gates the entries of leader-only tasks this way; ``LeaderGate`` gates every
entry the same way. ``celery.beat.Service.sync`` (beat stopping) is wrapped so
that a stopping beat leaves the election at once. The wrappers are installed
by ``_hooks.install_once()``, never at import, and decide on every call
(sentry-python's ``_wrap_beat_scheduler``): an entry of a task that is not
leader-only, a scheduler that gates every entry itself and an app that never
used the beat election go straight through to Celery's code.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery import beat
from celery.schedules import schedstate

from zk_recipes_celery import _metrics
from zk_recipes_celery._beat_election import BeatElection, BeatRole, beat_election, leave
from zk_recipes_celery._lifecycle import existing_app_state

log = logging.getLogger("zk_recipes.celery.beat")

#: Set on a function by ``@leader_only``.
LEADER_ONLY_MARK = "__zk_recipes_leader_only__"
#: Set on our wrappers, so that Celery's methods are never wrapped twice.
_PATCHED = "_zk_recipes_patched"
#: How soon a due entry whose sender is not known yet is looked at again (seconds).
UNKNOWN_ROLE_POLL = 0.2


def is_leader_only(task: Any) -> bool:
    run = getattr(task, "run", None)
    return bool(getattr(task, "zk_leader_only", False) or getattr(run, LEADER_ONLY_MARK, False))


def drop(scheduler: Any, entry: Any, election: BeatElection, reason: str) -> None:
    """Do not send ``entry`` now: log, count and signal why."""
    log.info(
        "beat %s: not sending due task %s (%s): %s; leader: %s",
        election.identifier,
        entry.name,
        entry.task,
        reason,
        election.leader_identifier() or "none",
    )
    _metrics.count("beat_dropped", task=entry.task)
    _metrics.beat_publish_dropped.send(
        sender=scheduler, entry=entry.name, task=entry.task, reason=reason
    )


def decide(scheduler: Any, entry: Any, election: BeatElection, due: Any) -> Any:
    """``is_due``'s answer for a gated entry, deciding this beat's role for it (once).

    ``due`` is the scheduler's own ``(is_due, next)``. A due entry is put off while
    the role is unknown; otherwise the role is kept for ``decided_role``.
    """
    is_due, _ = due
    if not is_due:
        return due
    election.join()
    role = election.role()
    waiting: set[str] = scheduler.__dict__.setdefault("_zk_waiting", set())
    if role is BeatRole.UNKNOWN:
        scheduler._zk_decision = None
        if entry.name not in waiting:
            waiting.add(entry.name)
            log.info(
                "beat %s: due task %s (%s) waits: this beat does not know yet whether it "
                "leads (joining, or connection SUSPENDED); whoever leads sends it, late",
                election.identifier,
                entry.name,
                entry.task,
            )
        return schedstate(is_due=False, next=UNKNOWN_ROLE_POLL)
    waiting.discard(entry.name)
    scheduler._zk_decision = (entry.name, role)
    return due


def pending_role(scheduler: Any, entry: Any) -> BeatRole | None:
    """The role ``decide`` chose for ``entry``, left for its apply; None if none was."""
    decision = scheduler.__dict__.get("_zk_decision")
    if decision is not None and decision[0] == entry.name:
        role: BeatRole = decision[1]
        return role
    return None


def decided_role(scheduler: Any, entry: Any) -> BeatRole | None:
    """The role ``decide`` chose for ``entry`` (taken: it serves one apply), or None."""
    role = pending_role(scheduler, entry)
    scheduler._zk_decision = None
    return role


def _gated_by_us(scheduler: Any, entry: Any) -> bool:
    """A leader-only entry, in a scheduler that does not gate every entry itself."""
    if getattr(scheduler, "_zk_gates_every_entry", False):
        return False
    task = scheduler.app.tasks.get(entry.task)
    return task is not None and is_leader_only(task)


def _wrap_is_due(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def is_due(self: Any, entry: Any) -> Any:
        due = original(self, entry)
        if not _gated_by_us(self, entry):
            return due
        return decide(self, entry, beat_election(self.app), due)

    setattr(is_due, _PATCHED, True)
    return is_due


def _wrap_apply_entry(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def apply_entry(self: Any, entry: Any, producer: Any = None) -> Any:
        if _gated_by_us(self, entry):
            election = beat_election(self.app)
            role = decided_role(self, entry)
            if role is None:  # applied without is_due (not by tick): decide now
                role = BeatRole.LEADER if election.may_publish() else BeatRole.STANDBY
            if role is not BeatRole.LEADER:
                drop(self, entry, election, "this beat is not the leader")
                return None
        return original(self, entry, producer)

    setattr(apply_entry, _PATCHED, True)
    return apply_entry


def _wrap_service_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def sync(self: Any) -> Any:
        """Beat is stopping (``Service.sync`` closes the scheduler): leave the election now,
        so a standby takes over at once instead of after the session timeout."""
        try:
            return original(self)
        finally:
            state = existing_app_state(self.app)
            if state is not None and leave(state):
                state.process_client.close()

    setattr(sync, _PATCHED, True)
    return sync


def patch_scheduler() -> None:
    """Wrap ``Scheduler.is_due``, ``Scheduler.apply_entry`` and ``Service.sync``, each once."""
    if not getattr(beat.Scheduler.is_due, _PATCHED, False):
        beat.Scheduler.is_due = _wrap_is_due(beat.Scheduler.is_due)
    if not getattr(beat.Scheduler.apply_entry, _PATCHED, False):
        beat.Scheduler.apply_entry = _wrap_apply_entry(beat.Scheduler.apply_entry)
    if not getattr(beat.Service.sync, _PATCHED, False):
        beat.Service.sync = _wrap_service_sync(beat.Service.sync)


def on_beat_init(sender: Any = None, **kwargs: Any) -> None:
    """Join the election as soon as beat starts (the gate itself never relies on this)."""
    app = getattr(sender, "app", None)
    if app is None:
        return
    leader_only_entries = []
    for name, entry in (app.conf.beat_schedule or {}).items():
        task = app.tasks.get(entry.get("task"))
        if task is None:
            log.warning(
                "beat: schedule entry %r names task %r, which is not registered in this "
                "process: zk-recipes cannot tell whether it is @leader_only (import its module)",
                name,
                entry.get("task"),
            )
        elif is_leader_only(task):
            leader_only_entries.append(name)
    if leader_only_entries:
        beat_election(app).join()
