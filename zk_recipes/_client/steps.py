"""One algorithm, two drivers: a recipe written once as steps, run blocking or awaited.

Why: the asyncio API (``zk_recipes.aio``) must not carry a second copy of
any recipe, and a coroutine waiting its turn must not hold a thread. So an
operation that waits (the contender queue's turn, a create pipelined with a
listing, a holder's delete) is written as a generator that yields what it
needs done and gets each answer back (an exception is thrown in, so the
generator's own clean-up runs). Every step has ``block()``: what the
blocking driver (``run_blocking``, what every sync call runs) does with it.
The asyncio driver (``zk_recipes/aio/_drive.py``) awaits each kind instead:

- ``Reply(pending, timeout)``: a request already sent; its answer. Blocking:
  ``pending.result(timeout)``. Awaited: a future its answer completes on
  the loop, no thread.
- ``Call(fn)``: a bounded blocking call, for the rare paths not written as
  steps (making a missing parent, finding a protected node after a lost
  reply). Blocking: in place. Awaited: on a small pool of threads.
- The waits of the recipes' machinery (``_internals/waits.py``): a node's
  deletion, the connection, a back-off. Blocking: asleep on an event.
  Awaited: a future its watch, listener or timer completes.

Cost: a generator and one object per step over calling inline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import Any, Generic, Protocol, TypeVar

from zk_recipes._client.kazoo import Pending
from zk_recipes._client.loop_guard import warn_if_on_loop

T = TypeVar("T")


class Step(Protocol):
    """What a recipe's generator yields: ``block()`` does it on the calling thread."""

    def block(self) -> Any: ...


#: A recipe's operation: yields steps, is sent each one's answer, returns its result.
Steps = Generator[Step, Any, T]


@dataclasses.dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """The answer to a request already sent, waited for ``timeout`` seconds at most."""

    pending: Pending[T]
    timeout: float

    def block(self) -> T:
        return self.pending.outcome(self.timeout)  # run_blocking checked for a loop


@dataclasses.dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A bounded blocking call (see the module note)."""

    fn: Callable[[], T]

    def block(self) -> T:
        return self.fn()


def run_blocking(steps: Steps[T]) -> T:
    """Run ``steps`` on this thread, each step's ``block()`` in turn."""
    warn_if_on_loop(lambda: f"the sync call behind {getattr(steps, '__qualname__', 'it')}")
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(answer) if failure is None else steps.throw(failure)
            answer = failure = None  # not kept alive by the driver while the step runs
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            answer = step.block()
        except BaseException as exc:
            answer, failure = None, exc


def no_steps() -> Steps[None]:
    """Steps with nothing to do (the work was done, or handed over, when they were made)."""
    yield from ()


def call_step(fn: Callable[[], T]) -> Steps[T]:
    """One ``Call`` step: a rare slow path not written as steps."""
    answer: T = yield Call(fn)
    return answer


def reply_steps(pending: Pending[T], timeout: float) -> Steps[T]:
    """One ``Reply`` step: the answer to ``pending`` (a send for ``patient_steps``)."""
    answer: T = yield Reply(pending, timeout)
    return answer
