"""The processes of the rolling-replacement test (tests/client/test_ensemble.py).

Each runs one role on a client of its own, given one original server only,
until the parent sets ``stop``; then it writes what it saw to ``out`` (JSON):
its session ids at the start and the end, whether it ever saw LOST, and its
role's evidence (the lock's token, the latch's leadership, the queue's
fencing log, the cache's children).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from zk_recipes import (
    ConnectionState,
    DistributedQueue,
    ItemContext,
    LeaderLatch,
    Lock,
    TreeCache,
    ZkClient,
)
from zk_recipes.testing import StateRecorder

NAMESPACE = "/roll"


def _until(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def run_role(role: str, hosts: str, ready: Any, stop: Any, out: str) -> None:
    client = ZkClient(hosts, session_timeout=4.0, namespace=NAMESPACE)
    states = StateRecorder()
    client.add_listener(states)
    client.start()
    session = client.session_id
    result: dict[str, Any] = {"role": role}
    try:
        if role == "lock":
            lock = Lock(client, "/lock")
            assert lock.acquire(timeout=20)
            token = lock.fencing_token
            ready.set()
            stop.wait(120)
            result["held"] = _until(lock.is_held, 20)
            result["same_token"] = lock.fencing_token == token
            lock.release()
        elif role == "latch":
            latch = LeaderLatch(client, "/latch")
            latch.start()
            assert latch.await_leadership(20)
            ready.set()
            stop.wait(120)
            result["leader"] = _until(latch.has_leadership, 20)
            latch.close()
        elif role == "queue":
            log: list[tuple[str, int | None]] = []

            def consume(value: bytes, context: ItemContext) -> None:
                log.append((value.decode(), context.fencing_token))

            with DistributedQueue(client, "/jobs", consume, lock_path="/jobs-locks"):
                ready.set()
                stop.wait(120)
                _until(lambda: len(log) >= 4, 20)
            result["fencing_log"] = log
        elif role == "cache":
            client.ensure_path("/tree")
            with TreeCache(client, "/tree") as cache:
                assert cache.wait_initialized(20)
                ready.set()
                stop.wait(120)
                _until(lambda: len(cache.children("/tree")) >= 2, 20)
                result["children"] = sorted(cache.children("/tree"))
        result["same_session"] = client.session_id == session
        result["lost"] = ConnectionState.LOST in states.states
        # At-least-once: a second delivery is allowed after a claim was in doubt.
        result["suspended"] = ConnectionState.SUSPENDED in states.states
        followed = client.ensemble
        result["followed"] = followed.hosts if followed is not None else None
    finally:
        client.close()
        Path(out).write_text(json.dumps(result))
