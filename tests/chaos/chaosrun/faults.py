"""The parent's faults: the seeded schedule, whom a worker fault hits, and each fault.

Schedule (``random.Random(seed)``): first every kind at least once, in a
seeded order. The overlapping kinds go first, each drawing its partition among
those not applied yet; then every fault kind that no overlap has applied.
After that, random kinds from ``config.kinds`` until the load has run for
``duration`` seconds, with ``fault_gap`` seconds between two faults (or,
for a fault aimed at the next holder of the slow path, the wait for it). A fault
kind met inside an overlap counts as applied: the history records it with its
own row either way.

Every fault writes its rows to the history's ``faults`` table when it ends
(kind, target, pid, begin, end); an overlap writes the two faults it is made of,
whose times then overlap. A fault that fails (a quorum that does not come
back in time, a worker that vanished) is logged and kept in ``errors``; the
ensemble and every worker are restored and the run goes on, so one harness
hiccup does not waste a long run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess

from zk_recipes import LeaderLatch, Lock, NoNodeError, Owner, ZkClient, ZkRecipesError
from zk_recipes.testing import HarnessError, TcpProxy, ZooKeeperCluster

from .config import FAULT_KINDS, OVERLAP_KINDS, PARTITIONS, ChaosConfig, claims_path
from .shipper import LogShipper
from .store import record_fault


@dataclasses.dataclass
class Slot:
    """One worker place: its proxies (one per ensemble member) and its current process."""

    index: int
    proxies: list[TcpProxy]
    generation: int = 0
    worker: str = ""
    process: BaseProcess | None = None
    #: The parent's end of the worker's log pipe (a new one per generation).
    shipper: LogShipper | None = None


@dataclasses.dataclass(frozen=True)
class Step:
    """One entry of the schedule; ``partition`` is the drawn partition of an overlap."""

    kind: str
    partition: str = ""

    @property
    def applies(self) -> frozenset[str]:
        """The fault kinds this step records."""
        if self.kind == "partition_with_kill_leader":
            return frozenset({self.partition, "kill_leader"})
        if self.kind == "pause_with_restart_server":
            return frozenset({"pause_worker", "restart_server"})
        return frozenset({self.kind})

    def __str__(self) -> str:
        return f"{self.kind}({self.partition})" if self.partition else self.kind


class Faults:
    """Applies the schedule to a run's cluster and worker slots."""

    def __init__(
        self,
        cluster: ZooKeeperCluster,
        config: ChaosConfig,
        rng: random.Random,
        slots: list[Slot],
        respawn: Callable[[Slot], None],
        history: sqlite3.Connection,
        admin: ZkClient,
        log: Callable[[str], object],
    ) -> None:
        self.cluster = cluster
        self.config = config
        self._rng = rng
        self._slots = slots
        self._respawn = respawn
        self._history = history
        self._admin = admin
        self.log = log
        #: Steps applied, by schedule kind.
        self.schedule: Counter[str] = Counter()
        #: Faults that failed, with why (the run went on after restoring everything).
        self.errors: list[str] = []
        self._due = 0.0

    # -- the schedule -----------------------------------------------------------------------
    def first_pass(self) -> list[Step]:
        """Every kind of ``config.kinds`` at least once, overlaps first (see the module doc)."""
        rng, kinds = self._rng, self.config.kinds
        overlaps = [kind for kind in kinds if kind in OVERLAP_KINDS]
        rng.shuffle(overlaps)
        steps: list[Step] = []
        applied: set[str] = set()
        for kind in overlaps:
            step = Step(kind)
            if kind == "partition_with_kill_leader":
                fresh = [p for p in PARTITIONS if p not in applied]
                step = Step(kind, rng.choice(fresh or list(PARTITIONS)))
            steps.append(step)
            applied |= step.applies
        rest = [kind for kind in kinds if kind in FAULT_KINDS and kind not in applied]
        rng.shuffle(rest)
        return steps + [Step(kind) for kind in rest]

    def random_step(self) -> Step:
        kind = self._rng.choice(self.config.kinds)
        if kind == "partition_with_kill_leader":
            return Step(kind, self._rng.choice(list(PARTITIONS)))
        return Step(kind)

    def run(self, began: float) -> int:
        """Apply the schedule until the load has run ``duration`` s; the number of steps."""
        config, rng = self.config, self._rng
        plan = self.first_pass()
        applied = 0
        while plan or time.monotonic() - began < config.duration:
            self._due = time.monotonic() + rng.uniform(*config.fault_gap)
            step = plan.pop(0) if plan else self.random_step()
            applied += 1
            self.log(
                f"fault {applied} at {time.monotonic() - began:.0f}/{config.duration:.0f} s: {step}"
            )
            self.apply(step)
        return applied

    def apply(self, step: Step) -> None:
        self.schedule[step.kind] += 1
        try:
            if step.kind in PARTITIONS or step.kind == "pause_worker":
                self._worker_outage(step.kind)
            elif step.kind == "partition_with_kill_leader":
                self._partition_with_kill_leader(step.partition)
            else:
                getattr(self, f"_{step.kind}")()
        except (HarnessError, ZkRecipesError, OSError, RuntimeError) as exc:
            self.errors.append(f"{step}: {exc!r}"[:500])
            self.log(f"fault {step} failed: {exc!r}; restoring the ensemble and the workers")
            self.restore()

    def restore(self) -> None:
        """Nobody partitioned, nobody stopped, every member running, a quorum."""
        with contextlib.suppress(Exception):
            self.cluster.heal_quorum()
        for slot in self._slots:
            if slot.shipper is not None:
                slot.shipper.resume()
            for proxy in slot.proxies:
                with contextlib.suppress(HarnessError):
                    proxy.heal()
            process = slot.process
            if process is not None and process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)
        for member in self.cluster.servers:
            with contextlib.suppress(HarnessError):
                member.start()  # resumes a paused member, starts a stopped one
        self.cluster.wait_for_quorum(self.config.quorum_timeout)

    def _record(self, kind: str, target: str, pid: int | None, begin: int, end: int) -> None:
        record_fault(self._history, kind, target, pid, begin, end)

    def _when_due(self) -> None:
        """Wait out the gap since the last fault (the search for a target counts toward it)."""
        time.sleep(max(0.0, self._due - time.monotonic()))

    # -- whom a worker fault hits -----------------------------------------------------------
    def _target(self) -> Slot:
        """Mostly someone who holds something.

        With the lock family, 1/2 of the draws: a fresh holder of the slow lock
        path (the next one to take it, waited for up to 8 s, so most of its
        section is still ahead; that wait stands in for the gap since the last
        fault), 1/5: the latch's leader, 3/20: the holder of a random path.
        With the queues, 1/4 more: a fresh claimant of the slow queue (mid-item
        for 0.5-4.5 s). Else anyone (the draws are scaled to the families run).
        """
        rng, config = self._rng, self.config
        aims: list[tuple[float, str]] = []
        if "locks" in config.families:
            aims += [(0.5, "slow holder"), (0.2, "latch leader"), (0.15, "holder")]
        if "queues" in config.families:
            aims.append((0.25, "slow claimant"))
        aims.append((0.15, "anyone"))
        draw = rng.random() * sum(weight for weight, _ in aims)
        aim = aims[-1][1]
        for weight, name in aims:
            if draw < weight:
                aim = name
                break
            draw -= weight
        began = time.monotonic()
        found: Slot | None = None
        paths = config.lock_paths
        why = aim
        if aim == "slow holder":
            why, found = f"fresh holder of {paths[0]}", self._fresh_holder(paths[0], 8.0)
        elif aim == "slow claimant":
            slow = claims_path(config.queue_paths[1])
            why, found = f"fresh claimant in {slow}", self._fresh_claimant(slow, 8.0)
        else:
            self._when_due()
            if aim == "latch leader":
                with contextlib.suppress(ZkRecipesError):
                    leader = LeaderLatch(self._admin, config.latch_path).leader()
                    if leader is not None:
                        found = self._slot_of(leader.id)
            elif aim == "holder":
                path = rng.choice(paths)
                why, found = f"holder of {path}", self._holder(path)[1]
        if found is None:
            why, found = "anyone", rng.choice(self._slots)
        self.log(f"  target {found.worker}: {why} (after {time.monotonic() - began:.1f} s)")
        return found

    def _fresh_claimant(self, claims: str, timeout: float) -> Slot | None:
        """The worker of the next claim made under ``claims`` (by its owner's pid)."""
        with contextlib.suppress(ZkRecipesError):
            seen = set(self._admin.get_children(claims))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for name in sorted(set(self._admin.get_children(claims)) - seen):
                    with contextlib.suppress(NoNodeError):
                        data, _stat = self._admin.get(f"{claims}/{name}")
                        pid = Owner.from_bytes(data).pid
                        for slot in self._slots:
                            if slot.process is not None and slot.process.pid == pid:
                                return slot
                time.sleep(0.02)
        return None

    def _holder(self, path: str) -> tuple[str | None, Slot | None]:
        """The holder's node and worker slot (None, None when free or unreadable)."""
        with contextlib.suppress(ZkRecipesError):
            for contender in Lock(self._admin, path).contenders()[:1]:
                return contender.path, self._slot_of(contender.owner.id)
        return None, None

    def _fresh_holder(self, path: str, timeout: float) -> Slot | None:
        first, _ = self._holder(path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node, slot = self._holder(path)
            if node is not None and node != first and slot is not None:
                return slot
            time.sleep(0.02)
        return None

    def _slot_of(self, worker: object) -> Slot | None:
        return next((slot for slot in self._slots if slot.worker == worker), None)

    def _outage_length(self) -> float:
        return self.config.outage + self._rng.uniform(0.0, 1.0)

    # -- worker faults ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _outage(self, kind: str, slot: Slot) -> Iterator[None]:
        """Pause or partition ``slot``'s worker for the block; recorded when it ends."""
        process = slot.process
        pid = process.pid if process is not None else None
        shipper = slot.shipper if kind == "blocked_log_worker" else None
        if shipper is not None:
            shipper.stall()  # its next WARNING blocks: the stream is stalled before the cut
        begin = time.monotonic_ns()
        if kind == "pause_worker":
            if pid is None:
                raise RuntimeError(f"worker slot {slot.index} has no process")
            os.kill(pid, signal.SIGSTOP)
        else:
            for proxy in slot.proxies:
                getattr(proxy, PARTITIONS[kind])()
        try:
            yield
        finally:
            if kind == "pause_worker" and pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            else:
                for proxy in slot.proxies:
                    proxy.heal()
            self._record(kind, slot.worker, pid, begin, time.monotonic_ns())
            if shipper is not None:
                shipper.resume()

    def _worker_outage(self, kind: str) -> None:
        slot = self._target()
        outage = self._outage_length()
        with self._outage(kind, slot):
            time.sleep(outage)

    def _kill_worker(self) -> None:
        slot = self._target()
        process = slot.process
        if process is None or process.pid is None:
            raise RuntimeError(f"worker slot {slot.index} has no process")
        begin = time.monotonic_ns()
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
        self._record("kill_worker", slot.worker, process.pid, begin, time.monotonic_ns())
        self._respawn(slot)

    # -- server faults ----------------------------------------------------------------------
    def _restart_server(self) -> None:
        member = self._rng.choice(self.cluster.servers)
        self._when_due()
        begin = time.monotonic_ns()
        member.restart()
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        self._record("restart_server", repr(member), None, begin, time.monotonic_ns())

    def _isolate_follower(self) -> None:
        """Cut a follower off from the other members while its clients still reach it.

        It keeps answering its clients' reads and pings until it notices
        (``sync_limit * tick_time``), while the leader expires the sessions it no
        longer hears of: a holder on it must learn of its loss before anyone
        else is given its lock.
        """
        leader = self.cluster.wait_for_quorum(self.config.quorum_timeout)
        follower = self._rng.choice([m for m in self.cluster.servers if m is not leader])
        outage = self._outage_length()
        self._when_due()
        begin = time.monotonic_ns()
        self.cluster.isolate(follower)
        try:
            time.sleep(outage)
        finally:
            self.cluster.heal_quorum()
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        self._record("isolate_follower", repr(follower), None, begin, time.monotonic_ns())

    def _kill_leader(self) -> None:
        leader = self.cluster.wait_for_quorum(self.config.quorum_timeout)
        down = self._rng.uniform(0.5, 2.0)
        self._when_due()
        begin = time.monotonic_ns()
        leader.kill()
        time.sleep(down)
        leader.start()
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        self._record("kill_leader", repr(leader), None, begin, time.monotonic_ns())

    # -- overlapping faults -----------------------------------------------------------------
    def _partition_with_kill_leader(self, partition: str) -> None:
        """Partition a worker; inside that, kill the ensemble's leader and start it again.

        The partitioned worker's session then lives through an election (the new
        leader gives every session a fresh timeout), and the churn pauses while
        there is no leader to write to.
        """
        slot = self._target()
        outage = self._outage_length()
        lead, down = self._rng.uniform(0.2, 1.0), self._rng.uniform(0.5, 2.0)
        leader = self.cluster.wait_for_quorum(self.config.quorum_timeout)
        with self._outage(partition, slot):
            ends = time.monotonic() + outage
            time.sleep(lead)
            begin = time.monotonic_ns()
            leader.kill()
            time.sleep(down)
            leader.start()
            time.sleep(max(0.0, ends - time.monotonic()))
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        self._record("kill_leader", repr(leader), None, begin, time.monotonic_ns())

    def _pause_with_restart_server(self) -> None:
        """SIGSTOP a worker; inside that, restart a member (maybe the one it talks to)."""
        slot = self._target()
        outage = self._outage_length()
        lead = self._rng.uniform(0.2, 1.0)
        member = self._rng.choice(self.cluster.servers)
        with self._outage("pause_worker", slot):
            ends = time.monotonic() + outage
            time.sleep(lead)
            begin = time.monotonic_ns()
            member.restart()
            time.sleep(max(0.0, ends - time.monotonic()))
        self.cluster.wait_for_quorum(self.config.quorum_timeout)
        self._record("restart_server", repr(member), None, begin, time.monotonic_ns())
