"""The chaos run: workers contending for fenced locks and a latch while faults rain on them.

Shared by ``tests/chaos/test_chaos_short.py`` and ``benchmarks/chaos.py``; see
``docs/chaos.md``. The parent process:

1. creates the history file (``_chaos_store``) and gives every worker slot its
   own chain of ``TcpProxy`` objects, one per ensemble member, so that one
   worker can be partitioned alone;
2. spawns the workers (``_chaos_worker``) and waits until each has connected;
3. applies faults one at a time on a schedule drawn from ``random.Random(seed)``:
   every kind once first (in a seeded order), then random kinds until the
   load has run for ``duration`` seconds. Worker faults mostly target a
   current holder (read from its node's owner data), above all of the slow
   first path, or the latch's leader, so that they hit critical sections;
4. stops the workers, waits for their nodes to go, lists what is left
   (orphans), and hands the history to the checker (``_chaos_check``).

Fault kinds: ``kill_worker`` (SIGKILL, then a replacement in the same slot),
``pause_worker`` (SIGSTOP for longer than the session timeout, then SIGCONT),
``partition_worker`` (its proxies black-holed for longer than the session
timeout, then healed), ``restart_server`` (graceful stop and start of one
member), ``kill_leader`` (SIGKILL of the ensemble's leader, restarted after a
moment; we wait for a quorum).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from zk_recipes import LeaderLatch, Lock, NoNodeError, ZkClient, ZkRecipesError
from zk_recipes.testing import HarnessError, TcpProxy, ZooKeeperCluster, proxied_connect_string

from ._chaos_check import check
from ._chaos_store import connect, create, record_fault
from ._chaos_worker import WorkerSpec, run_worker

FAULT_KINDS = ("kill_worker", "pause_worker", "partition_worker", "restart_server", "kill_leader")


@dataclasses.dataclass(frozen=True)
class ChaosConfig:
    #: Seconds of load (the schedule still applies every fault kind once, even if longer).
    duration: float = 25.0
    workers: int = 8
    seed: int = 0
    lock_paths: tuple[str, ...] = ("/locks/a", "/locks/b", "/locks/c")
    latch_path: str = "/leader"
    session_timeout: float = 2.5
    #: Upper bound of the random "work" inside a critical section, before the write ...
    hold_max: float = 0.005
    #: ... except on the first lock path, the slow one, where holders stay long enough
    #: for faults to find them (uniform in this range, seconds).
    slow_hold: tuple[float, float] = (0.5, 3.0)
    #: Each worker takes the slow path once every so many seconds (uniform), so that its
    #: queue stays short (8 workers: held a little over half of the time).
    slow_every: tuple[float, float] = (16.0, 32.0)
    acquire_timeout: float = 5.0
    #: Pause between two faults, seconds (uniform).
    fault_gap: tuple[float, float] = (0.5, 2.0)
    kinds: tuple[str, ...] = FAULT_KINDS
    #: Load that runs on after the last fault, so its aftermath is in the history.
    settle: float = 3.0
    quorum_timeout: float = 90.0

    @property
    def outage(self) -> float:
        """How long a pause or a partition lasts at least: well past the session timeout."""
        return self.session_timeout * 1.6


@dataclasses.dataclass
class _Slot:
    index: int
    proxies: list[TcpProxy]
    generation: int = 0
    worker: str = ""
    process: BaseProcess | None = None


class ChaosRun:
    """One run against ``cluster`` in ``namespace``; files go to ``run_dir``."""

    def __init__(
        self,
        cluster: ZooKeeperCluster,
        namespace: str,
        run_dir: Path,
        config: ChaosConfig,
        log: Callable[[str], object] = lambda message: None,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.run_dir = run_dir
        self.config = config
        self.log = log
        self.db_path = run_dir / "history.sqlite"
        self._rng = random.Random(config.seed)
        self._context = multiprocessing.get_context("spawn")
        self._stop_path = run_dir / "stop"
        self._slots: list[_Slot] = []
        self._spawned = 0

    # -- the run -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        config = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        create(self.db_path, config.lock_paths)
        began = time.monotonic()
        with contextlib.ExitStack() as stack:
            faults = connect(self.db_path)
            stack.callback(faults.close)
            admin = ZkClient(
                self.cluster.connect_string,
                namespace=self.namespace,
                session_timeout=10.0,
                connection_timeout=30.0,
            )
            admin.start()
            stack.callback(admin.close)
            stack.callback(self._restore_cluster)
            for index in range(config.workers):
                proxies = [
                    stack.enter_context(TcpProxy(m.host, m.port)) for m in self.cluster.servers
                ]
                self._slots.append(_Slot(index, proxies))
            stack.callback(self._stop_workers)
            for slot in self._slots:
                self._spawn(slot)
            self._wait_started(120.0)
            load_began = time.monotonic()
            self.log(f"{config.workers} workers running; faults begin")
            applied = self._fault_loop(faults, admin, load_began)
            time.sleep(config.settle)
            load_s = time.monotonic() - load_began
            self.log("stopping workers")
            hung = self._stop_workers()
            self._restore_cluster()
            orphans, orphan_wait = self._orphans(admin)
        report = check(self.db_path, config.lock_paths)
        report.update(
            {
                "orphans": len(orphans),
                "orphan_nodes": orphans,
                "orphan_wait_s": round(orphan_wait, 2),
                "faults_applied": applied,
                "workers_spawned": self._spawned,
                "workers_hung_at_stop": hung,
                "load_s": round(load_s, 1),
                "elapsed_s": round(time.monotonic() - began, 1),
                "acquisitions_per_s": round(report["acquisitions"] / load_s, 1),
                "config": {
                    **dataclasses.asdict(config),
                    "lock_paths": list(config.lock_paths),
                    "kinds": list(config.kinds),
                },
                "history": str(self.db_path),
            }
        )
        (self.run_dir / "report.json").write_text(render(report) + "\n")
        return report

    def _fault_loop(self, faults: sqlite3.Connection, admin: ZkClient, began: float) -> int:
        config, rng = self.config, self._rng
        pending = list(config.kinds)
        rng.shuffle(pending)
        applied = 0
        while pending or time.monotonic() - began < config.duration:
            time.sleep(rng.uniform(*config.fault_gap))
            kind = pending.pop() if pending else rng.choice(config.kinds)
            self.log(f"fault {applied + 1}: {kind}")
            getattr(self, f"_{kind}")(faults, admin)
            applied += 1
        return applied

    # -- faults --------------------------------------------------------------------------
    def _target(self, admin: ZkClient) -> _Slot:
        """Whom a worker fault hits: mostly someone who holds something.

        1/2: a fresh holder of the slow path (the next one to take it, waited
        for up to 8 s, so most of its section is still ahead), 1/5: the latch's
        leader, 3/20: the holder of a random path, else anyone.
        """
        rng, paths = self._rng, self.config.lock_paths
        draw = rng.random()
        found: _Slot | None = None
        if draw < 0.5:
            found = self._fresh_holder(admin, paths[0], 8.0)
        elif draw < 0.7:
            with contextlib.suppress(ZkRecipesError):
                leader = LeaderLatch(admin, self.config.latch_path).leader()
                if leader is not None:
                    found = self._slot_of(leader.id)
        elif draw < 0.85:
            found = self._holder(admin, rng.choice(paths))[1]
        return found if found is not None else rng.choice(self._slots)

    def _holder(self, admin: ZkClient, path: str) -> tuple[str | None, _Slot | None]:
        """The holder's node and worker slot (None, None when free or unreadable)."""
        with contextlib.suppress(ZkRecipesError):
            for contender in Lock(admin, path).contenders()[:1]:
                return contender.path, self._slot_of(contender.owner.get("id"))
        return None, None

    def _fresh_holder(self, admin: ZkClient, path: str, timeout: float) -> _Slot | None:
        first, _ = self._holder(admin, path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node, slot = self._holder(admin, path)
            if node is not None and node != first and slot is not None:
                return slot
            time.sleep(0.02)
        return None

    def _slot_of(self, worker: object) -> _Slot | None:
        return next((slot for slot in self._slots if slot.worker == worker), None)

    def _kill_worker(self, faults: sqlite3.Connection, admin: ZkClient) -> None:
        slot = self._target(admin)
        process, pid = _process_of(slot)
        begin = time.monotonic_ns()
        os.kill(pid, signal.SIGKILL)
        process.join(30)
        record_fault(faults, "kill_worker", slot.worker, pid, begin, time.monotonic_ns())
        self._spawn(slot)

    def _pause_worker(self, faults: sqlite3.Connection, admin: ZkClient) -> None:
        slot = self._target(admin)
        _, pid = _process_of(slot)
        outage = self.config.outage + self._rng.uniform(0.0, 1.0)
        begin = time.monotonic_ns()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(outage)
        finally:
            os.kill(pid, signal.SIGCONT)
            end = time.monotonic_ns()
        record_fault(faults, "pause_worker", slot.worker, pid, begin, end)

    def _partition_worker(self, faults: sqlite3.Connection, admin: ZkClient) -> None:
        slot = self._target(admin)
        pid = slot.process.pid if slot.process is not None else None
        outage = self.config.outage + self._rng.uniform(0.0, 1.0)
        begin = time.monotonic_ns()
        for proxy in slot.proxies:
            proxy.blackhole()
        try:
            time.sleep(outage)
        finally:
            for proxy in slot.proxies:
                proxy.heal()
            end = time.monotonic_ns()
        record_fault(faults, "partition_worker", slot.worker, pid, begin, end)

    def _restart_server(self, faults: sqlite3.Connection, admin: ZkClient) -> None:
        member = self._rng.choice(self.cluster.servers)
        begin = time.monotonic_ns()
        member.restart()
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        record_fault(faults, "restart_server", repr(member), None, begin, time.monotonic_ns())

    def _kill_leader(self, faults: sqlite3.Connection, admin: ZkClient) -> None:
        leader = self.cluster.wait_for_quorum(self.config.quorum_timeout)
        begin = time.monotonic_ns()
        leader.kill()
        time.sleep(self._rng.uniform(0.5, 2.0))
        leader.start()
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        record_fault(faults, "kill_leader", repr(leader), None, begin, time.monotonic_ns())

    # -- workers -------------------------------------------------------------------------
    def _spawn(self, slot: _Slot) -> None:
        config = self.config
        slot.generation += 1
        slot.worker = f"w{slot.index}.{slot.generation}"
        spec = WorkerSpec(
            worker=slot.worker,
            hosts=proxied_connect_string(slot.proxies),
            namespace=self.namespace,
            db_path=str(self.db_path),
            log_path=str(self.run_dir / f"{slot.worker}.log"),
            lock_paths=config.lock_paths,
            latch_path=config.latch_path,
            session_timeout=config.session_timeout,
            hold_max=config.hold_max,
            slow_hold=config.slow_hold,
            slow_every=config.slow_every,
            acquire_timeout=config.acquire_timeout,
            seed=self._rng.getrandbits(32),
            stop_path=str(self._stop_path),
        )
        process = self._context.Process(
            target=run_worker, args=(spec,), name=f"chaos-{slot.worker}", daemon=True
        )
        process.start()
        slot.process = process
        self._spawned += 1

    def _wait_started(self, timeout: float) -> None:
        wanted = {slot.worker for slot in self._slots}
        deadline = time.monotonic() + timeout
        while True:
            conn = connect(self.db_path)
            try:
                started = {
                    row[0] for row in conn.execute("SELECT worker FROM events WHERE kind='started'")
                }
            finally:
                conn.close()
            if wanted <= started:
                return
            dead = [s.worker for s in self._slots if s.process and not s.process.is_alive()]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"chaos workers did not start: missing {wanted - started}")
            time.sleep(0.2)

    def _stop_workers(self) -> int:
        """Stop every worker (nobody stays stopped or partitioned); how many had to be killed."""
        self._stop_path.touch()
        for slot in self._slots:
            for proxy in slot.proxies:
                with contextlib.suppress(Exception):
                    proxy.heal()
            process = slot.process
            if process is not None and process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)
        hung = 0
        deadline = time.monotonic() + 60.0
        for slot in self._slots:
            process = slot.process
            if process is None:
                continue
            process.join(max(0.1, deadline - time.monotonic()))
            if process.is_alive():
                hung += 1
                process.kill()
                process.join(10)
            slot.process = None
        return hung

    # -- cluster and leftovers -----------------------------------------------------------
    def _restore_cluster(self) -> None:
        for member in self.cluster.servers:
            with contextlib.suppress(HarnessError):
                member.start()  # resumes a paused member, starts a stopped one
        self.cluster.wait_for_quorum(self.config.quorum_timeout)

    def _orphans(self, admin: ZkClient, timeout: float = 30.0) -> tuple[list[str], float]:
        """Nodes left under the lock and latch paths once every worker is gone.

        Killed workers' sessions take up to the session timeout to expire, so
        this waits (up to ``timeout``) for the count to reach zero.
        """
        began = time.monotonic()
        paths = (*self.config.lock_paths, self.config.latch_path)
        while True:
            left: list[str] = []
            try:
                for path in paths:
                    with contextlib.suppress(NoNodeError):
                        left += [f"{path}/{child}" for child in admin.get_children(path)]
            except ZkRecipesError as exc:
                left = [f"<error: {exc!r}>"]
            waited = time.monotonic() - began
            if not left or waited > timeout:
                return left, waited
            time.sleep(0.25)


def _process_of(slot: _Slot) -> tuple[BaseProcess, int]:
    process = slot.process
    if process is None or process.pid is None:
        raise RuntimeError(f"worker slot {slot.index} has no process")
    return process, process.pid


def run_chaos(
    cluster: ZooKeeperCluster,
    namespace: str,
    run_dir: Path,
    config: ChaosConfig,
    log: Callable[[str], object] = lambda message: None,
) -> dict[str, Any]:
    """Run the chaos run and return the checker's figures (plus the run's own)."""
    return ChaosRun(cluster, namespace, run_dir, config, log).run()


def render(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
