"""The chaos run: workers contending for fenced locks and a latch while faults rain on them.

Shared by ``tests/chaos/test_chaos_short.py`` and ``benchmarks/chaos.py``; see
``docs/chaos.md``. The parent process:

1. creates the history file (``store``), the churn nodes, and gives every
   worker slot its own chain of ``TcpProxy`` objects, one per ensemble member,
   so that one worker can be partitioned alone, in either direction;
2. spawns the workers (``worker``), waits until each has connected, and starts
   rewriting the churn nodes (``churn``) so watch notifications never stop,
   and the discovery observer (``discovery.Observer``) listing the service;
3. applies the seeded fault schedule (``faults``): every kind once or more,
   overlaps included, then random kinds until the load has run for
   ``duration`` seconds;
4. tells the producers to stop and waits for the queues to empty (``queues``);
5. stops the workers, waits for their nodes to go, lists what is left
   (orphans and leftovers), reads the queues' end state into the history,
   and hands the history to the checker (``check``).

The kinds and the families are listed in ``config``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zk_recipes import NoNodeError, ZkClient, ZkRecipesError
from zk_recipes.testing import HarnessError, TcpProxy, ZooKeeperCluster, proxied_connect_string

from . import queues
from .check import check
from .churn import ChurnWriter, create_churn_nodes
from .config import ChaosConfig, claims_path
from .discovery import Observer
from .faults import Faults, Slot
from .shipper import LogShipper
from .store import connect, create, record_final
from .worker import WorkerSpec, run_worker


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
        self._stop_producing = run_dir / "stop-producing"
        self._slots: list[Slot] = []
        self._spawned = 0

    # -- the run -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        config = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        create(self.db_path, config.lock_paths)
        began = time.monotonic()
        with contextlib.ExitStack() as stack:
            history = connect(self.db_path)
            stack.callback(history.close)
            admin = self._client(stack)
            churner = self._client(stack)  # its own session: a stalled write delays no fault
            create_churn_nodes(admin, config.churn_paths)
            if "queues" in config.families:
                queues.make_dirs(admin, config.queue_paths, config.results_path)
            stack.callback(self._restore_cluster)
            for index in range(config.workers):
                proxies = [
                    stack.enter_context(TcpProxy(m.host, m.port)) for m in self.cluster.servers
                ]
                self._slots.append(Slot(index, proxies))
            stack.callback(self._stop_workers)
            for slot in self._slots:
                self._spawn(slot)
            self._wait_started(120.0)
            churn = ChurnWriter(churner, config.churn_paths, config.churn_interval).start()
            stack.callback(churn.stop)
            observer = None
            if "discovery" in config.families:
                observer = Observer(
                    self._client(stack), self._service_path, config.observe_every, self.db_path
                ).start()
                stack.callback(observer.stop)
            faults = Faults(
                self.cluster, config, self._rng, self._slots, self._spawn, history, admin, self.log
            )
            load_began = time.monotonic()
            self.log(f"{config.workers} workers running; faults begin")
            applied = faults.run(load_began)
            time.sleep(config.settle)
            load_s = time.monotonic() - load_began
            drain_s, undrained = self._drain(admin)
            churn.stop()
            self.log("stopping workers")
            exited = [s.worker for s in self._slots if s.process and not s.process.is_alive()]
            hung = self._stop_workers()
            self._restore_cluster()
            # Every family's nodes that go with their holder's session, waited for at once.
            left, orphan_wait = self._orphans(admin, self._orphan_paths())
            locks = tuple(f"{path}/" for path in (*config.lock_paths, config.latch_path))
            orphans = [node for node in left if node.startswith(locks)]
            leftovers = [node for node in left if node.startswith(self._service_path + "/")]
            if observer is not None:
                observer.stop()
            if "queues" in config.families:
                record_final(
                    history, queues.final_rows(admin, config.queue_paths, config.results_path)
                )
        self.log("checking the history")
        report = check(
            self.db_path,
            config.lock_paths,
            families=config.families,
            ghost_bound=config.ghost_bound,
            session_timeout=config.session_timeout,
            max_attempts=config.max_attempts,
        )
        if observer is not None:
            report["discovery"].update(
                {
                    "leftovers": len(leftovers),
                    "leftover_nodes": leftovers,
                    "observer_snapshots": observer.snapshots,
                    "observer_failures": observer.failures,
                }
            )
        if "queues" in config.families:
            report["queues"].update({"drain_s": round(drain_s, 1), "left_after_drain": undrained})
        report.update(
            {
                "orphans": len(orphans),
                "orphan_nodes": orphans,
                "orphan_wait_s": round(orphan_wait, 2),
                "faults_applied": applied,
                "schedule": dict(sorted(faults.schedule.items())),
                "fault_errors": faults.errors,
                "churn_writes": churn.writes,
                "churn_write_failures": churn.failures,
                "workers_spawned": self._spawned,
                "workers_exited_early": exited,
                "workers_hung_at_stop": hung,
                "load_s": round(load_s, 1),
                "elapsed_s": round(time.monotonic() - began, 1),
                "acquisitions_per_s": round(report["acquisitions"] / load_s, 1),
                "config": {
                    **dataclasses.asdict(config),
                    "lock_paths": list(config.lock_paths),
                    "kinds": list(config.kinds),
                    "families": list(config.families),
                    "queue_paths": list(config.queue_paths),
                },
                "history": str(self.db_path),
            }
        )
        (self.run_dir / "report.json").write_text(render(report) + "\n")
        return report

    def _client(self, stack: contextlib.ExitStack) -> ZkClient:
        """A parent's client, straight to the ensemble (no proxy), closed with the stack."""
        client = ZkClient(
            self.cluster.connect_string,
            namespace=self.namespace,
            session_timeout=10.0,
            connection_timeout=30.0,
        )
        client.start()
        stack.callback(client.close)
        return client

    # -- workers -------------------------------------------------------------------------
    def _spawn(self, slot: Slot) -> None:
        config = self.config
        slot.generation += 1
        slot.worker = f"w{slot.index}.{slot.generation}"
        if slot.shipper is not None:
            slot.shipper.close()
        slot.shipper = LogShipper(
            self.run_dir / f"{slot.worker}.pipe", self.run_dir / f"{slot.worker}.shipped.log"
        )
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
            churn_paths=config.churn_paths,
            seed=self._rng.getrandbits(32),
            stop_path=str(self._stop_path),
            shipper_path=str(slot.shipper.path),
            families=config.families,
            queue_paths=config.queue_paths,
            results_path=config.results_path,
            put_every=config.put_every,
            slow_put_every=config.slow_put_every,
            poison=config.poison,
            max_attempts=config.max_attempts,
            retry_backoff=config.retry_backoff,
            stop_producing_path=str(self._stop_producing),
            services_path=config.services_path,
            service=config.service,
            dynamic_instances=config.dynamic_instances,
            discovery_every=config.discovery_every,
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
            if slot.shipper is not None:
                slot.shipper.resume()
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
            if slot.shipper is not None:
                slot.shipper.close()
                slot.shipper = None
        return hung

    def _drain(self, admin: ZkClient) -> tuple[float, int]:
        """Stop the producers; wait for the queues to empty. (Seconds waited, nodes left.)"""
        if "queues" not in self.config.families:
            return 0.0, 0
        self._stop_producing.touch()
        self.log("producers stopped; draining the queues")
        began = time.monotonic()
        while True:
            try:
                left = queues.remaining(admin, self.config.queue_paths)
            except ZkRecipesError:
                left = -1
            waited = time.monotonic() - began
            if left == 0 or waited > self.config.drain_timeout:
                return waited, left
            time.sleep(0.25)

    # -- cluster and leftovers -----------------------------------------------------------
    @property
    def _service_path(self) -> str:
        return f"{self.config.services_path}/{self.config.service}"

    def _orphan_paths(self) -> tuple[str, ...]:
        """Where nodes go with their holder's session: locks, latch, claims, put markers,
        instances. (``orphans`` counts those of the lock family, ``queues.leftovers`` and
        ``discovery.leftovers`` the others.)"""
        config = self.config
        paths: tuple[str, ...] = ()
        if "locks" in config.families:
            paths += (*config.lock_paths, config.latch_path)
        if "queues" in config.families:
            paths += tuple(claims_path(p) for p in config.queue_paths)
            paths += tuple(p + "-puts" for p in config.queue_paths)
        if "discovery" in config.families:
            paths += (self._service_path,)
        return paths

    def _restore_cluster(self) -> None:
        for member in self.cluster.servers:
            with contextlib.suppress(HarnessError):
                member.start()  # resumes a paused member, starts a stopped one
        self.cluster.wait_for_quorum(self.config.quorum_timeout)

    def _orphans(
        self, admin: ZkClient, paths: tuple[str, ...], timeout: float = 30.0
    ) -> tuple[list[str], float]:
        """Nodes left under ``paths`` once every worker is gone.

        Killed workers' sessions take up to the session timeout to expire, so
        this waits (up to ``timeout``) for the count to reach zero.
        """
        began = time.monotonic()
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
    """The report as the JSON both the test (on failure) and the benchmark show."""
    return json.dumps(report, indent=2, sort_keys=True)


__all__ = ["ChaosConfig", "ChaosRun", "render", "run_chaos"]
