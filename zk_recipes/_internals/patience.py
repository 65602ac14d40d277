"""Riding out disconnects until the deadline: the one loop of every recipe that waits.

``patient(client, deadline, send)`` calls ``send(request_timeout)`` until it
is answered. Connection failures are waited out — until connected again,
then with a short back-off if it fails at once again (kazoo between two
sessions), never spinning — and so is SessionLost unless
``through_session_loss`` is False (the client builds a new session; the
caller re-checks its own nodes). The first try always gets a real chance
(``FIRST_TRY`` seconds), so a deadline of "now" still looks once. Once the
deadline passes, or ``cancel`` is set, it raises Expired. A closed client's
ClientStateError, and every answer from the server (NoNode...), go to the
caller. The barriers' reads, the contender queue's enter and re-read, and
the semaphore's lease nodes and lease list all go through it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, call_step, run_blocking
from zk_recipes._deadline import remaining
from zk_recipes._errors import ConnectionLostError, SessionLost, ZkTimeoutError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.waits import Pause, WaitConnected

log = logging.getLogger("zk_recipes.patience")

T = TypeVar("T")

#: The least time given to the first try of a request, however close the deadline.
FIRST_TRY = 1.0


class Expired(Exception):
    """The deadline passed (or the wait was cancelled) while a request could not be served."""


def patient(
    client: ZkClient,
    deadline: float | None,
    send: Callable[[float], T],
    *,
    cancel: Cancellation | None = None,
    through_session_loss: bool = True,
    also: tuple[type[BaseException], ...] = (),
    what: str | None = None,
) -> T:
    """``send(request_timeout)`` until it is answered; Expired once the deadline passes.

    ``also``: more failures to wait out (RetriesExhaustedError, for a send
    that retries by itself). ``what``: logged at the first failure ("queueing
    in /x failed ...; trying again once connected").
    """
    return run_blocking(
        patient_steps(
            client,
            deadline,
            lambda limit: call_step(functools.partial(send, limit)),
            cancel=cancel,
            through_session_loss=through_session_loss,
            also=also,
            what=what,
        )
    )


def patient_steps(
    client: ZkClient,
    deadline: float | None,
    send: Callable[[float], Steps[T]],
    *,
    cancel: Cancellation | None = None,
    through_session_loss: bool = True,
    also: tuple[type[BaseException], ...] = (),
    what: str | None = None,
) -> Steps[T]:
    """``patient()`` as steps (_client/steps.py): each try is ``send(limit)``'s steps, each
    wait a step of its own, so an awaited ride-out holds no thread while it waits."""
    failures_to_wait_out: tuple[type[BaseException], ...] = (
        ConnectionLostError,
        ZkTimeoutError,
        *also,
        *((SessionLost,) if through_session_loss else ()),
    )
    first = True
    failures = 0
    while True:
        limit = client.settings.connection_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 and not first:
                raise Expired
            limit = min(limit, max(left, FIRST_TRY) if first else max(left, 0.001))
        first = False
        try:
            answer: T = yield from send(limit)
            return answer
        except failures_to_wait_out as exc:
            failures += 1
            if what is not None:
                (log.info if failures == 1 else log.debug)(
                    "%s failed (%s); trying again once connected", what, exc
                )
        if cancel is not None and cancel.is_set():
            raise Expired
        after = remaining(deadline)
        if after is not None and after <= 0:
            raise Expired
        yield WaitConnected(client, min(1.0, after) if after is not None else 1.0)
        if failures > 1:
            # Connected, yet failing again at once (kazoo between sessions): back off,
            # woken by a close or a cancellation.
            backoff = min(0.02 * 2**failures, 0.5)
            yield Pause(client, backoff if after is None else min(backoff, after), cancel)
