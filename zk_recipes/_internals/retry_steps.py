"""The client's retry loop as steps: a recipe's read retried, its back-off awaited in aio.

``client.retry(fn)`` sleeps on the calling thread between tries; a recipe
written as steps (_client/steps.py) cannot, or its asyncio form would block
the loop. Here the tries are steps and the back-off a ``Pause`` (woken early
by the client's close), with the same policy and the same decisions
(``RetryRun``, shared with ``_retry.retry``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, reply_steps
from zk_recipes._internals.waits import Pause
from zk_recipes._retry import RetryPolicy, RetryRun, is_retryable

T = TypeVar("T")


def retry_steps(
    client: ZkClient,
    make: Callable[[], Steps[T]],
    *,
    policy: RetryPolicy | None = None,
    timeout: float | None = None,
) -> Steps[T]:
    """``client.retry`` over the steps ``make()`` gives for each try (the client's policy
    unless ``policy``; ``timeout``: seconds for all the tries, as ``client.retry``'s)."""
    deadline = time.monotonic() + timeout if timeout is not None else None
    run = RetryRun(policy or client.settings.retry_policy, deadline=deadline)
    while True:
        try:
            return (yield from make())
        except Exception as exc:
            if not is_retryable(exc):
                raise
            delay = run.delay_after(exc)
        yield Pause(client, delay, None)


def request_steps(client: ZkClient, send: Callable[[], Any]) -> Steps[Any]:
    """A request retried under the client's policy: ``send()`` (a ``client.*_async``
    request's ``Pending``; untyped here, where recipes do not see the adapter) again
    after each failure."""
    limit = client.settings.connection_timeout
    return retry_steps(client, lambda: reply_steps(send(), limit))
