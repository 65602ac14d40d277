"""``on_lost="abort"``: stop a singleton run whose lock was lost, and only its body.

When the session is lost, another run may take the key, so a run that was
asked to abort gets ``SingletonAborted`` (a ``LockLost``) raised into the
thread running it, at its next Python bytecode (``PyThreadState_SetAsyncExc``;
a call blocked in C sees it when the call returns). An exception that can
land anywhere must be confined, so the ``Interrupter`` delivers it only while
it is *armed*, and it is armed only around the task's own function:

- ``run_guarded`` registers ``Interrupter.fire`` as the lock's ``on_lost``
  callback as soon as the lock is held, and makes the interrupter pending for
  this context (``pending``); a loss reported before the body starts is only
  recorded.
- ``in_body`` (called by both front doors, right around the user's function)
  arms it. Arming first looks at what already happened (the recorded loss,
  and ``lock.lost`` itself, for a loss before the callback was registered): a
  run whose lock is already gone raises ``SingletonAborted`` *instead of*
  starting its body.
- Disarming also withdraws an exception fired but not delivered yet, so it
  can never reach our cleanup, Celery's tracer or a later task. One fired as
  the body returned can still be delivered inside the disarm itself: the
  caller disarms again and goes on with its cleanup (the body is over).

Between arming and the first bytecode of the user's function, and between its
last one and the disarm, an abort lands in a few bytecodes of ``in_body``
that hold nothing: it is then an abort at the body's first or last instant.
What the body itself does is not protected: see the hazards in
docs/integrations/celery.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import threading
from collections.abc import Callable, Iterator
from typing import Any

from zk_recipes import Lock, LockLost


class SingletonAborted(LockLost):
    """Raised inside a run with ``on_lost="abort"`` when its session was lost."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "the singleton lock of this task run was lost with its ZooKeeper session; "
            "another run may be executing now, so this one was aborted (on_lost='abort')"
        )


class Interrupter:
    """Raises SingletonAborted in the thread that made it, while armed; see the module note."""

    def __init__(self, lock: Lock) -> None:
        self._lock = lock
        self._thread_id = threading.get_ident()
        self._guard = threading.Lock()
        self._armed = False
        self._fired = False

    def fire(self, _lock: object = None) -> None:
        """The lock was lost (on a listener thread): interrupt the body if it runs."""
        with self._guard:
            self._fired = True
            if self._armed:
                self._set_async_exc(SingletonAborted)

    def arm(self) -> None:
        """From now until ``disarm``, a loss interrupts; a loss that came first aborts now."""
        with self._guard:
            if self._fired or self._lock.lost.is_set():
                raise SingletonAborted(
                    "the singleton lock of this task run was lost with its ZooKeeper session "
                    "before the task started; another run may hold it now, so this one did "
                    "not start (on_lost='abort')"
                )
            self._armed = True

    def disarm(self) -> None:
        """No more interruptions; withdraw one fired but not delivered yet. Idempotent."""
        with self._guard:
            if self._armed:
                self._armed = False
                self._set_async_exc(None)

    def _set_async_exc(self, exc: type[BaseException] | None) -> None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self._thread_id), None if exc is None else ctypes.py_object(exc)
        )


def disarm_for_cleanup(interrupter: Interrupter) -> None:
    """Disarm before cleaning up, even if the abort is delivered inside the first disarm."""
    try:
        interrupter.disarm()
    except SingletonAborted:
        # Fired as the body ended and delivered here, before the withdrawal: the
        # body is over, so the cleanup that follows must run.
        interrupter.disarm()


_pending: contextvars.ContextVar[Interrupter | None] = contextvars.ContextVar(
    "zk_recipes_singleton_interrupter", default=None
)


@contextlib.contextmanager
def pending(interrupter: Interrupter | None) -> Iterator[None]:
    """Let the next ``in_body`` in this context arm ``interrupter`` (None: nothing to arm)."""
    token = _pending.set(interrupter)
    try:
        yield
    finally:
        _pending.reset(token)


def in_body(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call the task's own function, armed against the loss of its lock if it asked to be."""
    interrupter = _pending.get()
    if interrupter is None:
        return fn(*args, **kwargs)
    _pending.set(None)  # a singleton task called from this body arms its own
    interrupter.arm()
    try:
        return fn(*args, **kwargs)
    finally:
        disarm_for_cleanup(interrupter)
