"""Leader benchmark: failover of kazoo's Election and our LeaderLatch, side by side in one run.

    python benchmarks/leader.py [--quick] [--out FILE] [--hosts HOST:PORT]
                                [--sections graceful,kill]

Prints one JSON document on stdout (progress on stderr). Sections:

- **graceful**: two spawned worker processes on one election path, one
  leading, one queued. The leader gives up (ours: ``LeaderLatch.close()``;
  kazoo: its ``Election.run`` leader function returns, which releases the
  lock) and the other's leadership callback runs (ours: ``is_leader``;
  kazoo: the leader function is entered). Failover = that moment minus the
  moment the leader began to give up, both on the system-wide monotonic
  clock. The old leader then queues again, so the roles alternate. kazoo and
  ours are interleaved in rotating rounds.
- **kill**: a fresh leader process is SIGKILLed (no goodbye to the server); a
  follower in another process leads once the server has expired the dead
  session and deleted its node. Failover is reported in seconds and as a
  ratio to the session timeout.

Never asserts timings: benchmarks measure, tests check behaviour.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

from _common import (
    WorkerPool,
    base_arguments,
    emit,
    latency_summary,
    load_average,
    machine_meta,
    median,
    parse_sections,
    progress,
    ratio,
    rotating_rounds,
    server_target,
)
from kazoo.client import KazooClient

import zk_recipes
from zk_recipes import LeaderLatch, ZkClient

SECTIONS = ("graceful", "kill")
IMPLS = ("kazoo_election", "ours")
#: As in locks.py: ZooKeeper's real standalone mode (a quorum of one sometimes holds a
#: write until the client's next packet) and its default container check interval.
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}


@dataclasses.dataclass(frozen=True)
class Settings:
    graceful_rounds: int
    graceful_per_round: int
    graceful_warmup: int
    settle_s: float
    session_timeout_s: float
    kill_session_timeout_s: float
    kill_rounds: int

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:
            return cls(4, 25, 5, 0.02, 10.0, 2.0, 2)
        return cls(5, 100, 10, 0.02, 10.0, 2.0, 4)


# -- the worker process: one client per implementation, one contender at a time ----------


class _Contender:
    """A candidate in one election, ours or kazoo's, inside a worker process."""

    def __init__(self, impl: str, client: Any, path: str, ident: str) -> None:
        self.impl = impl
        self.led = threading.Event()
        self.led_ns = 0
        self._resign = threading.Event()
        self._thread: threading.Thread | None = None
        self._latch: LeaderLatch | None = None
        self._election: Any = None
        if impl == "ours":
            self._latch = LeaderLatch(client, path, ident)
            self._latch.add_listener(self)
            self._latch.start()
        else:
            self._election = client.Election(path, ident)
            self._thread = threading.Thread(
                target=self._election.run, args=(self._lead,), daemon=True
            )
            self._thread.start()

    # LeaderLatchListener
    def is_leader(self) -> None:
        self.led_ns = time.monotonic_ns()
        self.led.set()

    def not_leader(self) -> None:
        pass

    def _lead(self) -> None:  # kazoo's leader function
        self.is_leader()
        self._resign.wait(120)

    def queued(self) -> bool:
        if self._latch is not None:
            return self._latch.node is not None
        return self._election.lock.node is not None

    def resign(self) -> int:
        """Give leadership up; return when we started to (time.monotonic_ns())."""
        began = time.monotonic_ns()
        if self._latch is not None:
            self._latch.close()
        else:
            self._resign.set()
            assert self._thread is not None
            self._thread.join(30)
        return began

    def leave(self) -> None:
        if self._latch is not None:
            self._latch.close()
            return
        if self.led.is_set():
            self._resign.set()
        else:
            self._election.cancel()
        assert self._thread is not None
        self._thread.join(30)


class _Worker:
    def __init__(self) -> None:
        self.kazoo: Any = None
        self.ours: ZkClient | None = None
        self.contender: _Contender | None = None

    def handle(self, tag: str, payload: Any) -> tuple[str, Any]:
        if tag == "open":
            spec = payload
            self.kazoo = KazooClient(hosts=spec["hosts"], timeout=spec["session_timeout_s"])
            self.kazoo.start(timeout=30)
            self.ours = ZkClient(
                spec["hosts"],
                namespace=spec["namespace"],
                session_timeout=spec["session_timeout_s"],
            ).start()
            return "opened", os.getpid()
        if tag == "join":
            impl, path = payload
            client = self.ours if impl == "ours" else self.kazoo
            self.contender = _Contender(impl, client, path, f"w{os.getpid()}")
            deadline = time.monotonic() + 30
            while not self.contender.queued():
                if time.monotonic() > deadline:
                    raise TimeoutError("the contender never created its node")
                time.sleep(0.001)
            return "joined", None
        assert self.contender is not None
        if tag == "await_leader":
            if not self.contender.led.wait(float(payload)):
                raise TimeoutError(f"not elected within {payload} s")
            return "leader", self.contender.led_ns
        if tag == "resign":
            return "resigned", self.contender.resign()
        if tag == "leave":
            self.contender.leave()
            return "left", None
        raise ValueError(f"unknown command {tag!r}")

    def close(self) -> None:
        if self.kazoo is not None:
            with contextlib.suppress(Exception):
                self.kazoo.stop()
                self.kazoo.close()
        if self.ours is not None:
            self.ours.close()


def worker(conn: Any) -> None:
    """Runs in a spawned process: obeys commands until "exit" or EOF."""
    logging.basicConfig(level=logging.ERROR)
    state = _Worker()
    try:
        while True:
            try:
                tag, payload = conn.recv()
            except (EOFError, OSError):
                return
            if tag == "exit":
                return
            try:
                conn.send(state.handle(tag, payload))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        state.close()


def _spec(target: Any, session_timeout: float) -> dict[str, Any]:
    return {
        "hosts": target.hosts,
        "namespace": f"{target.root}/ours",
        "session_timeout_s": session_timeout,
    }


def _path(target: Any, impl: str, rel: str) -> str:
    """kazoo's elections live under ``root/kazoo``; ours under the ``root/ours`` namespace."""
    return f"{target.root}/kazoo{rel}" if impl == "kazoo_election" else rel


# -- graceful --------------------------------------------------------------------------------


def run_graceful(target: Any, s: Settings) -> dict[str, Any]:
    samples: dict[str, list[int]] = {impl: [] for impl in IMPLS}
    round_p50: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    progress("graceful: spawning 2 worker processes")
    with WorkerPool(2, worker) as pool:
        both = [0, 1]
        pool.send(both, ("open", _spec(target, s.session_timeout_s)))
        pool.gather(both, "opened", 60)
        for index, order in rotating_rounds(IMPLS, s.graceful_rounds):
            for impl in order:
                progress(f"graceful: round {index + 1}/{s.graceful_rounds}, {impl}")
                path = _path(target, impl, f"/graceful/r{index}")
                leader, follower = 0, 1
                pool.send([leader], ("join", (impl, path)))
                pool.gather([leader], "joined", 30)
                pool.send([leader], ("await_leader", 30))
                pool.gather([leader], "leader", 35)
                pool.send([follower], ("join", (impl, path)))
                pool.gather([follower], "joined", 30)
                this_round: list[int] = []
                for rep in range(s.graceful_warmup + s.graceful_per_round):
                    time.sleep(s.settle_s)  # the follower's watch is surely set
                    pool.send([follower], ("await_leader", 30))
                    pool.send([leader], ("resign", None))
                    (resigned_ns,) = pool.gather([leader], "resigned", 35)
                    (led_ns,) = pool.gather([follower], "leader", 35)
                    if rep >= s.graceful_warmup:
                        this_round.append(int(led_ns) - int(resigned_ns))
                    leader, follower = follower, leader
                    pool.send([follower], ("join", (impl, path)))
                    pool.gather([follower], "joined", 30)
                pool.send(both, ("leave", None))
                pool.gather(both, "left", 30)
                samples[impl] += this_round
                round_p50[impl].append(median(this_round) / 1e6)
    results: dict[str, Any] = {
        impl: {**latency_summary(samples[impl]), "round_p50_ms": [round(x, 4) for x in ps]}
        for impl, ps in round_p50.items()
    }
    kz, ours = results["kazoo_election"], results["ours"]
    paired = [o / k for o, k in zip(round_p50["ours"], round_p50["kazoo_election"], strict=True)]
    results["ratios"] = {
        "ours_p50_over_kazoo_election_p50": ratio(ours["p50_ms"], kz["p50_ms"]),
        "ours_p90_over_kazoo_election_p90": ratio(ours["p90_ms"], kz["p90_ms"]),
        "ours_p99_over_kazoo_election_p99": ratio(ours["p99_ms"], kz["p99_ms"]),
        "paired_median_ours_over_kazoo_election_p50": round(median(paired), 3),
    }
    return results


# -- kill -9 ---------------------------------------------------------------------------------


def run_kill(target: Any, s: Settings) -> dict[str, Any]:
    session = s.kill_session_timeout_s
    failovers: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    progress("kill: spawning the follower process")
    with WorkerPool(1, worker) as follower:
        follower.send([0], ("open", _spec(target, session)))
        follower.gather([0], "opened", 60)
        for index, order in rotating_rounds(IMPLS, s.kill_rounds):
            for impl in order:
                progress(f"kill: round {index + 1}/{s.kill_rounds}, {impl}")
                path = _path(target, impl, f"/kill/r{index}")
                with WorkerPool(1, worker) as victim:
                    victim.send([0], ("open", _spec(target, session)))
                    (pid,) = victim.gather([0], "opened", 60)
                    victim.send([0], ("join", (impl, path)))
                    victim.gather([0], "joined", 30)
                    victim.send([0], ("await_leader", 30))
                    victim.gather([0], "leader", 35)
                    follower.send([0], ("join", (impl, path)))
                    follower.gather([0], "joined", 30)
                    time.sleep(0.2)
                    follower.send([0], ("await_leader", 10 * session + 30))
                    killed_ns = time.monotonic_ns()
                    os.kill(int(pid), signal.SIGKILL)
                    (led_ns,) = follower.gather([0], "leader", 10 * session + 35)
                    failovers[impl].append((int(led_ns) - killed_ns) / 1e9)
                follower.send([0], ("leave", None))
                follower.gather([0], "left", 30)
    results: dict[str, Any] = {"session_timeout_s": session}
    for impl in IMPLS:
        values = sorted(failovers[impl])
        results[impl] = {
            "n": len(values),
            "failover_s": [round(v, 3) for v in failovers[impl]],
            "median_s": round(median(values), 3),
            "max_s": round(values[-1], 3),
            "median_over_session_timeout": round(median(values) / session, 3),
            "max_over_session_timeout": round(values[-1] / session, 3),
        }
    results["ratios"] = {
        "ours_median_over_kazoo_election_median": ratio(
            results["ours"]["median_s"], results["kazoo_election"]["median_s"]
        )
    }
    return results


# -- the run ---------------------------------------------------------------------------------


def notes(s: Settings, target: Any, sections: Sequence[str]) -> list[str]:
    return [
        "Noisy machine: a shared 2-core box where other test suites run at the same time "
        "(load averages in meta). Compare the ratios from one run, not absolute figures.",
        "graceful: failover = the new leader's callback (ours: is_leader; kazoo: its "
        "Election.run leader function entered) minus the old leader's give-up call (ours: "
        "LeaderLatch.close(); kazoo: setting the event its leader function waits on, after "
        "which Election.run releases its Lock), both time.monotonic_ns() in two different "
        f"processes. {s.graceful_rounds} rotating rounds of {s.graceful_per_round} failovers "
        f"per contestant after {s.graceful_warmup} warm-up ones; the follower is given "
        f"{s.settle_s * 1000:g} ms to set its watch before each give-up. paired_median is the "
        "median over rounds of the per-round p50 ratio.",
        "kill: a fresh leader process is killed with SIGKILL; failover = the follower's "
        "callback minus the kill. It is dominated by the server's session expiry, which "
        "counts from the dead client's last packet (a ping, before the kill: so failover can "
        "be a little under the session timeout) and is checked once per tick (so at most "
        "the session timeout plus one tick), then one delete notification.",
        "The throwaway server is the test harness's ZooKeeper in real standalone mode "
        "(tick 0.2 s), container checks every 60 s."
        if target.owned
        else f"External server {target.hosts}.",
        f"sections run: {', '.join(sections)}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_arguments(__doc__.splitlines()[0] if __doc__ else "leader", SECTIONS)
    args = parser.parse_args(argv)
    sections = parse_sections(args.sections, SECTIONS)
    s = Settings.make(args.quick)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    started, began = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    load_start = machine_meta()
    doc: dict[str, Any] = {"meta": {}, "graceful": None, "kill": None, "notes": []}
    failed: list[str] = []
    with server_target(args.hosts, **SERVER_OPTIONS) as target:
        progress(f"server {target.hosts}")
        admin = KazooClient(hosts=target.hosts, timeout=s.session_timeout_s)
        admin.start(timeout=30)
        max_latency = ""
        try:
            zookeeper_version = target.version()
            admin.ensure_path(target.root)
            for section in sections:
                try:
                    if section == "graceful":
                        doc["graceful"] = run_graceful(target, s)
                    else:
                        doc["kill"] = run_kill(target, s)
                except Exception as exc:
                    traceback.print_exc()
                    failed.append(f"section {section} failed: {exc!r}")
        finally:
            with contextlib.suppress(Exception):
                max_latency = target.mntr().get("zk_max_latency", "")
            target.remove_root(admin)
            admin.stop()
            admin.close()
        doc["meta"] = {
            "benchmark": "leader",
            "started_at": started.isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - began, 1),
            "quick": args.quick,
            "sections": sections,
            "machine": {**load_start, "load_avg_end": load_average()},
            "python": sys.version.split()[0],
            "kazoo_version": importlib.metadata.version("kazoo"),
            "zk_recipes_version": zk_recipes.__version__,
            "zookeeper_version": zookeeper_version,
            "server": {
                "hosts": target.hosts,
                "own_throwaway_server": target.owned,
                "options": target.options,
                "zk_max_latency_ms_at_end": max_latency,
            },
            "settings": dataclasses.asdict(s),
        }
        doc["notes"] = notes(s, target, sections) + failed
    emit(doc, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
