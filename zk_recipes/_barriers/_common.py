"""What Barrier and DoubleBarrier share: a data check and watch helpers."""

from __future__ import annotations

from collections.abc import Callable

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, reply_steps
from zk_recipes._errors import WrongTypeError
from zk_recipes._types import Wakeable, WatchEvent, ZnodeStat


def check_data(data: object) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WrongTypeError(f"data must be bytes, got {type(data).__name__}")
    return bytes(data)


def exists_request(
    client: ZkClient, path: str, watch: Callable[[WatchEvent], None]
) -> Callable[[float], ZnodeStat | None]:
    """A request for ``patient``: ``exists(path)`` with ``watch`` armed."""
    return lambda limit: client.exists_async(path, watch=watch).result(limit)


def exists_steps(
    client: ZkClient, path: str, watch: Callable[[WatchEvent], None]
) -> Callable[[float], Steps[ZnodeStat | None]]:
    """``exists_request`` as steps, for ``patient_steps`` (_client/steps.py)."""
    return lambda limit: reply_steps(client.exists_async(path, watch=watch), limit)


def waker(event: Wakeable) -> Callable[[WatchEvent], None]:
    """A watch that sets ``event`` on any event (a change, a deletion, kazoo's NONE)."""

    def wake(_event: WatchEvent) -> None:
        event.set()

    return wake
