"""The ``@leader_only`` gate inside every beat scheduler, and beat's start and stop.

``celery.beat.Scheduler.apply_entry`` is wrapped so that any scheduler
(PersistentScheduler, django-celery-beat's DatabaseScheduler, ...) sends a
leader-only task only from the leader beat; ``celery.beat.Service.sync``
(beat stopping) is wrapped so that a stopping beat leaves the election at once.
The wrappers are installed by ``_hooks.install_once()``, never at import, and
decide on every call (sentry-python's ``_wrap_beat_scheduler``): an entry of
a task that is not leader-only, a scheduler that gates every entry itself
(``LeaderGate``) and an app that never used the beat election go straight
through to Celery's code.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery import beat

from zk_recipes_celery import _metrics
from zk_recipes_celery._beat_election import BeatElection, beat_election
from zk_recipes_celery._lifecycle import existing_app_state

log = logging.getLogger("zk_recipes.celery.beat")

#: Set on a function by ``@leader_only``.
LEADER_ONLY_MARK = "__zk_recipes_leader_only__"
#: Set on our wrappers, so that Celery's methods are never wrapped twice.
_PATCHED = "_zk_recipes_patched"


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


def _wrap_apply_entry(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def apply_entry(self: Any, entry: Any, producer: Any = None) -> Any:
        if not getattr(self, "_zk_gates_every_entry", False):
            task = self.app.tasks.get(entry.task)
            if task is not None and is_leader_only(task):
                election = beat_election(self.app)
                if not election.may_publish():
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
            election = None if state is None else state.beat_election
            if state is not None and election is not None:
                state.beat_election = None
                election.close()
                state.clients.close()

    setattr(sync, _PATCHED, True)
    return sync


def patch_scheduler() -> None:
    """Wrap ``Scheduler.apply_entry`` and ``Service.sync``; a wrapper is never wrapped again."""
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
