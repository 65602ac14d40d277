"""One chaos worker: a spawned process that loops acquire -> fenced write -> release.

Each worker builds its own ZkClient (through its own chain of proxies, so the
parent can partition it alone), one Lock per lock path and one LeaderLatch
(the ``locks`` family), and beside them, on the same client, the producer
and the consumers of the ``queues`` family (``queues.py``) and the instances
of the ``discovery`` family (``discovery.py``).
The critical section is: acquire returns (``start_ns``), a random "work"
sleep (short, but long on the first, "slow", lock path so faults find
holders), a wait while the lock is in doubt (SUSPENDED: until RECONNECTED or
LOST), then the write to the fenced store, which is its last act: the
store stamps ``end_ns`` inside its transaction, with whether ``lock.lost`` was
set by then. A worker told LOST still writes, on purpose: that is the stale
write the fencing token must stop.

Beside the loop, a ``ChurnWatch`` keeps data watches armed on the churn nodes
the parent rewrites (see ``churn``), so notifications keep arriving, above all
while the worker is partitioned.

Everything the checker needs is recorded, stamped with ``time.monotonic_ns()``
of the moment it was *decided*, not when a listener thread got around to it:
the latch's terms (its ``history``: when it decided to lead or stop, on which
node, with which token, and why), the client's connection states (their
``StateChange.at``, with the session in ``token``), the on_lost callback (path, token), each churn
notification, and the ``closing`` marker written before the latch and the
client are closed. Listener stamps could put a term's end after the next
leader's start when a listener thread runs late on a busy machine.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import time

from zk_recipes import (
    LeaderLatch,
    LeadershipDecision,
    Lock,
    RecipeUsageError,
    StateChange,
    ZkClient,
    ZkRecipesError,
)

from .churn import ChurnWatch
from .discovery import Registrar
from .queues import QueueWork
from .store import EventRecorder, FencedStore

#: How long a holder in doubt waits for the doubt to clear before writing anyway.
_DOUBT_LIMIT = 60.0


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs (picklable: it crosses the spawn boundary)."""

    worker: str
    hosts: str
    namespace: str
    db_path: str
    log_path: str
    lock_paths: tuple[str, ...]
    latch_path: str
    session_timeout: float
    #: Random "work" per critical section, seconds (uniform in [0, hold_max]) ...
    hold_max: float
    #: ... except on the first lock path, the slow one, where it is uniform in this range.
    slow_hold: tuple[float, float]
    #: A worker visits the slow path once every so many seconds (uniform in this range),
    #: and the other paths in between, so the slow path's queue stays short.
    slow_every: tuple[float, float]
    acquire_timeout: float
    #: Nodes to keep a data watch on (the parent rewrites them in turn).
    churn_paths: tuple[str, ...]
    seed: int
    #: The worker stops once this file exists. A file, not a multiprocessing.Event:
    #: an Event's lock, taken by a worker killed with -9, would stay taken for good.
    stop_path: str
    #: The named pipe its WARNING records go to (its "log shipper": see shipper.py).
    shipper_path: str
    #: What it runs (config.FAMILIES), and each family's settings (see ChaosConfig).
    families: tuple[str, ...]
    queue_paths: tuple[str, str]
    results_path: str
    put_every: tuple[float, float]
    slow_put_every: tuple[float, float]
    poison: float
    max_attempts: int
    retry_backoff: float
    #: Producers stop once this file exists (the queues then drain).
    stop_producing_path: str
    services_path: str
    service: str
    dynamic_instances: int
    discovery_every: tuple[float, float]


class _TermRecorder:
    """The latch's history: each term's start and end as decided, with node, token, why."""

    def __init__(self, events: EventRecorder) -> None:
        self._events = events

    def __call__(self, decision: LeadershipDecision) -> None:
        self._events.record(
            "leader" if decision.leading else "not_leader",
            path=decision.node or "",
            token=decision.token,
            detail=decision.reason,
            t_ns=decision.at_ns,
        )


def run_worker(spec: WorkerSpec) -> None:
    """The worker's main (the target of a spawned process)."""
    logging.basicConfig(
        filename=spec.log_path,
        level=logging.INFO,
        format="%(created).3f %(process)d %(threadName)s %(name)s %(levelname)s %(message)s",
    )
    # Warnings also go to the shipper's pipe, as a service's stderr goes to a log
    # shipper; the parent may stall it (blocked_log_worker).
    shipped = open(spec.shipper_path, "w", buffering=1)  # noqa: SIM115 - for the process's life
    shipping = logging.StreamHandler(shipped)
    shipping.setLevel(logging.WARNING)
    logging.getLogger().addHandler(shipping)
    pid = os.getpid()
    rng = random.Random(spec.seed)
    events = EventRecorder(spec.db_path, spec.worker, pid)
    store = FencedStore(spec.db_path, spec.lock_paths)
    client = ZkClient(
        spec.hosts,
        namespace=spec.namespace,
        session_timeout=spec.session_timeout,
        connection_timeout=30.0,
    )

    def on_state(change: StateChange) -> None:
        events.record(
            "state", detail=change.state.name, token=change.session_id, t_ns=int(change.at * 1e9)
        )

    client.add_listener(on_state)
    client.start()
    locks = {path: Lock(client, path, identifier=spec.worker) for path in spec.lock_paths}
    for path, lock in locks.items():

        def on_lost(lock: Lock, path: str = path) -> None:
            try:
                token: int | None = lock.fencing_token
            except RecipeUsageError:  # released meanwhile
                token = None
            events.record("lost", path=path, token=token)

        lock.on_lost(on_lost)
    latch = None
    if "locks" in spec.families:
        latch = LeaderLatch(client, spec.latch_path, spec.worker, history=_TermRecorder(events))
        latch.start()
    churn = ChurnWatch(client, spec.churn_paths, lambda path: events.record("notified", path=path))
    queues = _queue_work(spec, client, events, pid) if "queues" in spec.families else None
    registrar = _registrar(spec, client, events) if "discovery" in spec.families else None
    events.record("started", detail=client.connect_string)
    fast_paths = spec.lock_paths[1:] or spec.lock_paths
    next_slow = time.monotonic() + rng.uniform(0.0, spec.slow_every[1])
    try:
        while not os.path.exists(spec.stop_path):
            if "locks" not in spec.families:
                time.sleep(0.1)
                continue
            if time.monotonic() >= next_slow:
                path = spec.lock_paths[0]
                next_slow = time.monotonic() + rng.uniform(*spec.slow_every)
            else:
                path = rng.choice(fast_paths)
            _one_round(spec, rng, path, locks[path], store, events, pid)
    finally:
        events.record("closing")
        if registrar is not None:
            registrar.close()
        if queues is not None:
            queues.close()
        churn.close()
        if latch is not None:
            latch.close()
        client.close()
        store.close()
        events.record("closed")
        events.close()


def _queue_work(spec: WorkerSpec, client: ZkClient, events: EventRecorder, pid: int) -> QueueWork:
    return QueueWork(
        client,
        worker=spec.worker,
        pid=pid,
        events=events,
        db_path=spec.db_path,
        queue_paths=spec.queue_paths,
        results_path=spec.results_path,
        put_every=spec.put_every,
        slow_put_every=spec.slow_put_every,
        hold_max=spec.hold_max,
        slow_hold=spec.slow_hold,
        poison=spec.poison,
        max_attempts=spec.max_attempts,
        retry_backoff=spec.retry_backoff,
        seed=spec.seed ^ 0x51,
        stop_producing=lambda: os.path.exists(spec.stop_producing_path),
    )


def _registrar(spec: WorkerSpec, client: ZkClient, events: EventRecorder) -> Registrar:
    return Registrar(
        client,
        worker=spec.worker,
        events=events,
        base_path=spec.services_path,
        service=spec.service,
        dynamic=spec.dynamic_instances,
        every=spec.discovery_every,
        seed=spec.seed ^ 0xD15C,
    )


def _work_then_settle_doubt(lock: Lock, seconds: float) -> None:
    """Work for ``seconds``, then, like a careful holder, wait out any doubt before writing.

    While SUSPENDED the lock is in doubt (``is_held()`` False, ``lost`` not
    set): the write waits for RECONNECTED (held again) or LOST. After LOST the
    worker writes anyway, on purpose: the store's fencing must refuse it once
    a newer holder has written.
    """
    time.sleep(seconds)
    deadline = time.monotonic() + _DOUBT_LIMIT
    while not lock.lost.is_set() and not lock.is_held() and time.monotonic() < deadline:
        lock.lost.wait(0.02)


def _one_round(
    spec: WorkerSpec,
    rng: random.Random,
    path: str,
    lock: Lock,
    store: FencedStore,
    events: EventRecorder,
    pid: int,
) -> None:
    call_ns = time.monotonic_ns()
    try:
        acquired = lock.acquire(timeout=spec.acquire_timeout)
    except ZkRecipesError as exc:
        events.record("acquire_error", path=path, detail=repr(exc)[:200])
        time.sleep(0.1)  # the connection is down: do not spin
        return
    if not acquired:
        return
    start_ns = time.monotonic_ns()
    try:
        token = lock.fencing_token
        if path == spec.lock_paths[0]:
            work = rng.uniform(*spec.slow_hold)
        else:
            work = rng.uniform(0.0, spec.hold_max)
        _work_then_settle_doubt(lock, work)
        store.write(
            path=path,
            worker=spec.worker,
            pid=pid,
            token=token,
            call_ns=call_ns,
            start_ns=start_ns,
            told_lost=lock.lost.is_set,
        )
    finally:
        try:
            lock.release()
        except ZkRecipesError as exc:
            events.record("release_error", path=path, detail=repr(exc)[:200])
