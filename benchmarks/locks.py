"""Lock benchmark: the raw ZooKeeper floor, kazoo's Lock and ours, side by side in one run.

    python benchmarks/locks.py [--quick] [--out FILE] [--hosts HOST:PORT]
                               [--sections uncontended,handoff,contended,threads,watch,metrics]

Prints one JSON document on stdout (progress on stderr). See benchmarks/README.md
for what each figure means. Sections:

- **uncontended**: one client, acquire+release in a loop, for (1) the raw floor
  (create ephemeral-sequential + get_children + delete, sequential sync calls
  on a plain kazoo client), (2) kazoo's ``Lock`` and (3) ours; interleaved in
  rotating rounds. Latency percentiles, cycles/s, requests per cycle. With
  Java and Debian's Curator jars, (4) Curator's ``InterProcessMutex`` joins the
  rounds (the interop peer, tests/interop/CuratorPeer.java, on the same server),
  for Curator's absolute time beside ours.
- **contended**: N spawned processes loop acquire -> release on one path for a
  fixed time after a start barrier, kazoo's Lock and ours in ABBA order.
  Cycles/s, requests per cycle, hand-off latency (next acquire-return minus
  previous release-call on the merged, system-wide monotonic timeline).
- **threads**: N threads of one process, a lock object each on one path and one
  client shared (kazoo's ``Lock`` on a KazooClient, ours on a ZkClient), loop
  acquire -> release for a fixed time; with Java, Curator's
  ``InterProcessMutex`` the same way in its JVM (N threads, one
  CuratorFramework). Cycles/s, requests per cycle, client CPU per cycle.
- **watch**: L waiters queued behind one holder; the holder releases once and
  we count, client-side, the watch notifications the server delivers to all
  clients for that one release.
- **metrics**: our uncontended lock cycle with metrics off (``metrics.disable()``:
  the path a process without prometheus-client takes) and on (recording into a
  registry of its own), interleaved in rotating rounds on one client and lock.

Never asserts timings: benchmarks measure, tests check counts.
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import datetime
import gc
import importlib.metadata
import itertools
import logging
import math
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import (
    Counter,
    PacketWindow,
    Target,
    WorkerPool,
    base_arguments,
    count_pings,
    count_watch_events,
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
    wait_for_go,
)
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout as KazooLockTimeout

import zk_recipes
from zk_recipes import Lock, LockLike, ZkClient, metrics

ROOT = Path(__file__).resolve().parents[1]
#: The Curator peer runs with the JIT in full (the test peer stops at C1 to start fast).
CURATOR_JVM_OPTIONS = (
    "-Xshare:auto",
    "-XX:-UsePerfData",
    "-Xms64m",
    "-Xmx512m",
    "-Djava.net.preferIPv4Stack=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)

SECTIONS = ("uncontended", "handoff", "contended", "threads", "watch", "metrics")
#: Threads of one process in the ``threads`` section (Curator's anchor: 8 in one JVM).
THREAD_COUNTS = (8,)
IMPLS = ("kazoo_lock", "ours")
#: ZooKeeper's real standalone mode: the harness's default quorum of one (ZooKeeper 3.8.0)
#: now and then holds a write until the client's next packet, i.e. for a whole ping
#: interval (a third of the session timeout), which swamps every figure here. And
#: ZooKeeper's default container check interval: the harness's 0.1 s would reap our empty
#: lock directory in the middle of a tight loop, unlike any real server.
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}


@dataclasses.dataclass(frozen=True)
class Settings:
    cycles: int
    warmup: int
    rounds: int
    process_counts: tuple[int, ...]
    duration_s: float
    queue_lengths: tuple[int, ...]
    waiters_per_client: int
    settle_s: float
    quiet_s: float
    session_timeout_s: float
    handoffs: int
    #: ABBA rounds per process count in ``contended`` (each lock runs duration_s per round).
    contended_rounds: int

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:
            return cls(100, 50, 3, (2, 8, 32), 2.0, (1, 10, 100), 50, 0.3, 0.5, 10.0, 100, 1)
        return cls(2000, 200, 5, (2, 8, 32), 5.0, (1, 10, 100, 1000), 50, 0.5, 2.0, 10.0, 500, 3)


# -- clients and locks, for kazoo's Lock and ours ------------------------------------------


def start_kazoo(hosts: str, session_timeout: float) -> Any:
    client = KazooClient(hosts=hosts, timeout=session_timeout)
    client.start(timeout=30)
    return client


def stop_kazoo(client: Any) -> None:
    client.stop()
    client.close()


def lock_location(root: str, impl: str, rel: str) -> tuple[str, str]:
    """(namespace, path) of a lock: kazoo's under ``root/kazoo``, ours under ``root/ours``."""
    if impl == "kazoo_lock":
        return "", f"{root}/kazoo{rel}"
    return f"{root}/ours", rel


@contextlib.contextmanager
def open_client(impl: str, hosts: str, namespace: str, session_timeout: float) -> Iterator[Any]:
    """A started client for ``impl``: a KazooClient, or our ZkClient."""
    if impl == "kazoo_lock":
        kz = start_kazoo(hosts, session_timeout)
        try:
            yield kz
        finally:
            stop_kazoo(kz)
    else:
        with ZkClient(hosts, namespace=namespace, session_timeout=session_timeout) as client:
            yield client


def make_lock(impl: str, client: Any, path: str) -> LockLike:
    if impl == "kazoo_lock":
        lock: LockLike = client.Lock(path)
        return lock
    return Lock(client, path)


def kazoo_of(client: Any) -> Any:
    return client.kazoo_client if isinstance(client, ZkClient) else client


def acquire_bounded(lock: LockLike, timeout: float) -> bool:
    try:
        return lock.acquire(timeout=timeout)
    except KazooLockTimeout:  # kazoo signals a timeout either way
        return False


# -- hand-off -------------------------------------------------------------------------------


def _handoff_samples(impl: str, target: Target, s: Settings, count: int) -> list[int]:
    """``count`` hand-offs: a waiter already second in line, the holder releases.

    Each sample runs from the holder's ``release()`` call to the waiter's
    ``acquire()`` returning, both in this process (two clients, two
    sessions), so nothing else is mixed in: no re-queueing holder, no process
    switch, no third contender.
    """
    namespace, path = lock_location(target.root, impl, "/handoff")
    samples: list[int] = []
    with (
        open_client(impl, target.hosts, namespace, s.session_timeout_s) as holder_client,
        open_client(impl, target.hosts, namespace, s.session_timeout_s) as waiter_client,
    ):
        holder = make_lock(impl, holder_client, path)
        waiter = make_lock(impl, waiter_client, path)
        for _ in range(count):
            holder.acquire()
            acquired_ns: list[int] = []

            def wait_turn(done: list[int] = acquired_ns) -> None:
                waiter.acquire()
                done.append(time.perf_counter_ns())

            thread = threading.Thread(target=wait_turn)
            thread.start()
            time.sleep(0.003)  # let the waiter queue up and arm its watch
            released_ns = time.perf_counter_ns()
            holder.release()
            thread.join(30)
            samples.append(acquired_ns[0] - released_ns)
            waiter.release()
    return samples


def run_handoff(target: Target, s: Settings) -> dict[str, Any]:
    per_round = max(1, s.handoffs // s.rounds)
    samples: dict[str, list[int]] = {"kazoo_lock": [], "ours": []}
    round_p50: dict[str, list[float]] = {"kazoo_lock": [], "ours": []}
    for index, order in rotating_rounds(list(samples), s.rounds):
        for impl in order:
            progress(f"handoff: round {index + 1}/{s.rounds}, {impl}")
            got = _handoff_samples(impl, target, s, per_round)
            samples[impl] += got
            round_p50[impl].append(median([x / 1e6 for x in got]))
    result: dict[str, Any] = {
        impl: {**latency_summary(values), "round_p50_ms": [round(x, 4) for x in round_p50[impl]]}
        for impl, values in samples.items()
    }
    result["ratios"] = {
        "ours_over_kazoo_lock_p50": ratio(result["ours"]["p50_ms"], result["kazoo_lock"]["p50_ms"]),
        "ours_over_kazoo_lock_p99": ratio(result["ours"]["p99_ms"], result["kazoo_lock"]["p99_ms"]),
        "paired_median_ours_over_kazoo_lock_p50": ratio(
            median(round_p50["ours"]), median(round_p50["kazoo_lock"])
        ),
    }
    return result


# -- uncontended ----------------------------------------------------------------------------


@dataclasses.dataclass
class _Tally:
    samples: list[int] = dataclasses.field(default_factory=list)
    elapsed_ns: int = 0
    packets_raw: int = 0
    packets: float = 0.0
    pings: int = 0
    cpu_s: float = 0.0
    switches: tuple[int, int] | None = (0, 0)  # None: not measured (the JVM peer)
    round_p50_ms: list[float] = dataclasses.field(default_factory=list)
    round_cycles_per_s: list[float] = dataclasses.field(default_factory=list)

    def add_round(
        self,
        samples: list[int],
        elapsed_ns: int,
        cpu_s: float,
        *,
        switches: tuple[int, int] | None = None,
        window: PacketWindow | None = None,
    ) -> None:
        """One round's cycles; ``switches`` None: not measured (the tally then reports none)."""
        self.samples += samples
        self.elapsed_ns += elapsed_ns
        self.cpu_s += cpu_s
        if switches is None or self.switches is None:
            self.switches = None
        else:
            self.switches = (self.switches[0] + switches[0], self.switches[1] + switches[1])
        if window is not None:
            self.packets_raw += window.raw
            self.packets += window.corrected
            self.pings += window.pings_sent
        self.round_p50_ms.append(median(samples) / 1e6)
        self.round_cycles_per_s.append(len(samples) / (elapsed_ns / 1e9))

    def result(self) -> dict[str, Any]:
        n = len(self.samples)
        return {
            "cycles": n,
            **latency_summary(self.samples),
            "cycles_per_s": round(n / (self.elapsed_ns / 1e9), 1),
            "client_cpu_ms_per_cycle": round(self.cpu_s * 1000 / n, 4),
            "context_switches_per_cycle": (
                per_cycle_switches(*self.switches, n) if self.switches is not None else None
            ),
            "requests_per_cycle": round(self.packets / n, 3),
            "requests_per_cycle_uncorrected": round(self.packets_raw / n, 3),
            "own_pings_subtracted": self.pings,
            "round_p50_ms": [round(x, 4) for x in self.round_p50_ms],
            "round_cycles_per_s": [round(x, 1) for x in self.round_cycles_per_s],
        }


def context_switches() -> tuple[int, int]:
    """(voluntary, involuntary) context switches of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw


def per_cycle_switches(voluntary: int, involuntary: int, cycles: int) -> dict[str, float]:
    n = max(cycles, 1)
    return {
        "voluntary": round(voluntary / n, 2),
        "involuntary": round(involuntary / n, 2),
        "total": round((voluntary + involuntary) / n, 2),
    }


def timed_cycles(cycle: Callable[[], object], count: int) -> tuple[list[int], int]:
    clock = time.perf_counter_ns
    samples = [0] * count
    begin = clock()
    for index in range(count):
        start = clock()
        cycle()
        samples[index] = clock() - start
    return samples, clock() - begin


def start_curator(target: Target, stack: contextlib.ExitStack) -> Any:
    """The Curator interop peer on ``target``, or None (and why, on stderr) without Java/jars."""
    sys.path.insert(0, str(ROOT))  # the peer lives with the interop tests
    try:
        from tests.interop.curator import CuratorPeer, CuratorUnavailable, build_curator_peer
    except ImportError as exc:
        progress(f"uncontended: no Curator peer ({exc}); Curator left out")
        return None
    try:
        build = build_curator_peer(Path(stack.enter_context(tempfile.TemporaryDirectory())))
    except CuratorUnavailable as exc:
        progress(f"uncontended: Curator left out: {exc}")
        return None
    peer = CuratorPeer(build, target.hosts, 10_000, jvm_options=CURATOR_JVM_OPTIONS)
    stack.callback(peer.close)
    return peer


def curator_cycles(peer: Any, path: str, count: int, warmup: int = 0) -> tuple[list[int], int]:
    """(per-cycle ns, JVM CPU ns) for ``count`` timed InterProcessMutex cycles in the peer."""
    cpu, *samples = (int(x) for x in peer.call(f"cycles {path} {count} {warmup}", 300.0).split())
    return samples, cpu


def run_uncontended(target: Target, s: Settings, pings: Callable[[], int]) -> dict[str, Any]:
    root = target.root
    with contextlib.ExitStack() as stack:
        raw_kz = start_kazoo(target.hosts, s.session_timeout_s)
        stack.callback(stop_kazoo, raw_kz)
        lock_kz = start_kazoo(target.hosts, s.session_timeout_s)
        stack.callback(stop_kazoo, lock_kz)
        namespace, ours_path = lock_location(root, "ours", "/uncontended")
        ours_client = stack.enter_context(
            ZkClient(target.hosts, namespace=namespace, session_timeout=s.session_timeout_s)
        )
        counters = [count_pings(c) for c in (raw_kz, lock_kz, ours_client.kazoo_client)]

        raw_dir = f"{root}/raw/uncontended"
        raw_kz.ensure_path(raw_dir)

        def raw_cycle() -> None:
            node = raw_kz.create(f"{raw_dir}/n-", ephemeral=True, sequence=True)
            raw_kz.get_children(raw_dir)
            raw_kz.delete(node)

        kazoo_lock = make_lock("kazoo_lock", lock_kz, lock_location(root, "kazoo_lock", "/u")[1])
        ours = make_lock("ours", ours_client, ours_path)

        def lock_cycle(lock: LockLike) -> Callable[[], None]:
            def cycle() -> None:
                lock.acquire()
                lock.release()

            return cycle

        cycles = {
            "raw_floor": raw_cycle,
            "kazoo_lock": lock_cycle(kazoo_lock),
            "ours": lock_cycle(ours),
        }
        for name, cycle in cycles.items():
            progress(f"uncontended: warm-up {name} ({s.warmup} cycles)")
            timed_cycles(cycle, s.warmup)
        peer = start_curator(target, stack)
        curator_path = f"{root}/curator/uncontended"
        if peer is not None:
            # The JIT needs more than a few hundred cycles to settle: warm up 2000
            # (500 in a --quick run, which only checks that the run works and its counts).
            jit_warmup = 10 * s.warmup
            progress(f"uncontended: warm-up curator_mutex ({jit_warmup} cycles, in the JVM)")
            curator_cycles(peer, curator_path, 1, jit_warmup)
        names = [*cycles, "curator_mutex"] if peer is not None else list(cycles)

        def all_pings() -> int:
            return pings() + sum(c.value for c in counters)

        tallies = {name: _Tally() for name in names}
        per_round = s.cycles // s.rounds
        for index, order in rotating_rounds(names, s.rounds):
            progress(f"uncontended: round {index + 1}/{s.rounds} ({', '.join(order)})")
            for name in order:
                gc.collect()
                if name == "curator_mutex":  # the JVM times its own cycles and CPU
                    with PacketWindow(target, all_pings) as window:
                        samples, cpu_ns = curator_cycles(peer, curator_path, per_round)
                    tallies[name].add_round(samples, sum(samples), cpu_ns / 1e9, window=window)
                    continue
                cpu, (vol, invol) = time.process_time(), context_switches()
                with PacketWindow(target, all_pings) as window:
                    samples, elapsed = timed_cycles(cycles[name], per_round)
                cpu_s = time.process_time() - cpu
                vol_after, invol_after = context_switches()
                tallies[name].add_round(
                    samples,
                    elapsed,
                    cpu_s,
                    switches=(vol_after - vol, invol_after - invol),
                    window=window,
                )

    results = {name: tally.result() for name, tally in tallies.items()}
    raw, kz, ours_r = results["raw_floor"], results["kazoo_lock"], results["ours"]

    def paired(a: str, b: str, key: str) -> float | None:
        pairs = zip(getattr(tallies[a], key), getattr(tallies[b], key), strict=True)
        values = [x / y for x, y in pairs if y]
        return round(median(values), 3) if values else None

    curator = results.get("curator_mutex")
    curator_ratios = (
        {
            "ours_p50_over_curator_mutex_p50": ratio(ours_r["p50_ms"], curator["p50_ms"]),
            "ours_over_curator_mutex_cycles_per_s": ratio(
                ours_r["cycles_per_s"], curator["cycles_per_s"]
            ),
            "paired_median_ours_over_curator_mutex_p50": paired(
                "ours", "curator_mutex", "round_p50_ms"
            ),
        }
        if curator is not None
        else {}
    )
    results["ratios"] = {
        **curator_ratios,
        "ours_p50_over_raw_floor_p50": ratio(ours_r["p50_ms"], raw["p50_ms"]),
        "kazoo_lock_p50_over_raw_floor_p50": ratio(kz["p50_ms"], raw["p50_ms"]),
        "ours_p50_over_kazoo_lock_p50": ratio(ours_r["p50_ms"], kz["p50_ms"]),
        "ours_over_kazoo_lock_cycles_per_s": ratio(ours_r["cycles_per_s"], kz["cycles_per_s"]),
        "ours_over_kazoo_lock_client_cpu_per_cycle": ratio(
            ours_r["client_cpu_ms_per_cycle"], kz["client_cpu_ms_per_cycle"]
        ),
        "ours_over_kazoo_lock_context_switches_per_cycle": ratio(
            ours_r["context_switches_per_cycle"]["total"],
            kz["context_switches_per_cycle"]["total"],
        ),
        "ours_over_raw_floor_cycles_per_s": ratio(ours_r["cycles_per_s"], raw["cycles_per_s"]),
        "paired_median_ours_over_raw_floor_p50": paired("ours", "raw_floor", "round_p50_ms"),
        "paired_median_ours_over_kazoo_lock_p50": paired("ours", "kazoo_lock", "round_p50_ms"),
        "paired_median_ours_over_kazoo_lock_cycles_per_s": paired(
            "ours", "kazoo_lock", "round_cycles_per_s"
        ),
    }
    return results


# -- threads of one process -----------------------------------------------------------------


def _thread_cycles(impl: str, client: Any, path: str, threads: int, seconds: float) -> int:
    """``threads`` threads, a lock each on ``path`` and ``client``, cycling for ``seconds``."""
    locks = [make_lock(impl, client, path) for _ in range(threads)]
    go = threading.Event()
    counts = [0] * threads
    deadline = [0.0]

    def loop(index: int) -> None:
        lock = locks[index]
        go.wait()
        while time.monotonic() < deadline[0]:
            lock.acquire()
            lock.release()
            counts[index] += 1

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    deadline[0] = time.monotonic() + seconds
    go.set()
    for worker in workers:
        worker.join(seconds + 60)
    return sum(counts)


def run_threads(target: Target, s: Settings, pings: Callable[[], int]) -> dict[str, Any]:
    """Ours and kazoo's with N threads in one process, beside Curator's N threads in a JVM."""
    results: dict[str, Any] = {}
    seconds = s.duration_s
    with contextlib.ExitStack() as stack:
        peer = start_curator(target, stack)
        for threads in THREAD_COUNTS:
            entry: dict[str, Any] = {}
            names = [*IMPLS, "curator_mutex"] if peer is not None else list(IMPLS)
            for round_, order in rotating_rounds(names, s.contended_rounds):
                for impl in order:
                    progress(f"threads: {threads} threads, {impl}, {seconds:g} s")
                    rel = f"/threads/t{threads}-{round_}"
                    if impl == "curator_mutex":
                        path = f"{target.root}/curator{rel}"
                        with PacketWindow(target, pings) as window:
                            reply = peer.call(
                                f"threads {path} {threads} {int(seconds * 1000)}", seconds + 120
                            )
                        cycles, elapsed_ns, cpu_ns = (int(x) for x in reply.split())
                        elapsed, cpu = elapsed_ns / 1e9, cpu_ns / 1e9
                    else:
                        namespace, path = lock_location(target.root, impl, rel)
                        with open_client(
                            impl, target.hosts, namespace, s.session_timeout_s
                        ) as client:
                            counter = count_pings(kazoo_of(client))

                            def ours_pings(counter: Any = counter) -> int:
                                return pings() + int(counter.value)

                            with PacketWindow(target, ours_pings) as window:
                                cpu, began = time.process_time(), time.monotonic()
                                cycles = _thread_cycles(impl, client, path, threads, seconds)
                                elapsed = time.monotonic() - began
                                cpu = time.process_time() - cpu
                    runs = entry.setdefault(impl, [])
                    runs.append(
                        {
                            "cycles_per_s": cycles / elapsed,
                            "requests_per_cycle": window.corrected / max(1, cycles),
                            "client_cpu_us_per_cycle": cpu / max(1, cycles) * 1e6,
                        }
                    )
            summary: dict[str, Any] = {
                impl: {
                    key: median([run[key] for run in runs])
                    for key in ("cycles_per_s", "requests_per_cycle", "client_cpu_us_per_cycle")
                }
                | {"runs": runs}
                for impl, runs in entry.items()
            }
            summary["ours_over_kazoo_lock_cycles_per_s"] = ratio(
                summary["ours"]["cycles_per_s"], summary["kazoo_lock"]["cycles_per_s"]
            )
            if "curator_mutex" in summary:
                summary["ours_over_curator_mutex_cycles_per_s"] = ratio(
                    summary["ours"]["cycles_per_s"], summary["curator_mutex"]["cycles_per_s"]
                )
                summary["curator_mutex_over_kazoo_lock_cycles_per_s"] = ratio(
                    summary["curator_mutex"]["cycles_per_s"], summary["kazoo_lock"]["cycles_per_s"]
                )
            results[str(threads)] = summary
    return results


# -- metrics on and off ---------------------------------------------------------------------


def run_metrics(target: Target, s: Settings) -> dict[str, Any]:
    """The uncontended cycle of our Lock with metrics off and on, in one run."""
    previous = metrics.registry()
    registry: Any = None
    modes = ["off"]
    try:
        import prometheus_client
    except ImportError:
        pass  # the core alone: metrics off is all there is
    else:
        registry = prometheus_client.CollectorRegistry()
        modes.append("on")

    def switch(mode: str) -> None:
        if mode == "on":
            metrics.enable(registry)
        else:
            metrics.disable()

    namespace, path = lock_location(target.root, "ours", "/metrics")
    tallies = {mode: _Tally() for mode in modes}
    per_round = s.cycles // s.rounds
    try:
        with ZkClient(target.hosts, namespace=namespace, session_timeout=s.session_timeout_s) as c:
            lock = Lock(c, path)

            def cycle() -> None:
                lock.acquire()
                lock.release()

            for mode in modes:
                progress(f"metrics: warm-up, metrics {mode} ({s.warmup} cycles)")
                switch(mode)
                timed_cycles(cycle, s.warmup)
            for index, order in rotating_rounds(modes, s.rounds):
                progress(f"metrics: round {index + 1}/{s.rounds} ({', '.join(order)})")
                for mode in order:
                    switch(mode)
                    gc.collect()
                    cpu = time.process_time()
                    samples, elapsed = timed_cycles(cycle, per_round)
                    tallies[mode].add_round(samples, elapsed, time.process_time() - cpu)
    finally:
        if previous is not None:
            metrics.enable(previous)
        else:
            metrics.disable()
    keep = ("cycles", "n", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "cycles_per_s")
    results: dict[str, Any] = {}
    for mode, tally in tallies.items():
        full = tally.result()
        results[mode] = {
            **{k: full[k] for k in keep if k in full},
            "client_cpu_ms_per_cycle": full["client_cpu_ms_per_cycle"],
            "round_p50_ms": full["round_p50_ms"],
        }
    if "on" in results:
        on, off = results["on"], results["off"]

        def paired(key: str) -> float | None:
            pairs = zip(getattr(tallies["on"], key), getattr(tallies["off"], key), strict=True)
            values = [x / y for x, y in pairs if y]
            return round(median(values), 3) if values else None

        results["ratios"] = {
            "on_p50_over_off_p50": ratio(on["p50_ms"], off["p50_ms"]),
            "on_over_off_cycles_per_s": ratio(on["cycles_per_s"], off["cycles_per_s"]),
            "on_over_off_client_cpu_per_cycle": ratio(
                on["client_cpu_ms_per_cycle"], off["client_cpu_ms_per_cycle"]
            ),
            "paired_median_on_over_off_p50": paired("round_p50_ms"),
            "paired_median_on_over_off_cycles_per_s": paired("round_cycles_per_s"),
        }
        acquisitions = registry.get_sample_value(
            "zk_recipes_lock_acquisitions_total", {"recipe": "Lock", "template": "other"}
        )
        results["recorded_acquisitions"] = int(acquisitions or 0)
    else:
        results["note"] = "prometheus-client is not installed: metrics off only"
    return results


# -- contended ------------------------------------------------------------------------------


def contended_worker(conn: Any) -> None:
    """Runs in a spawned process: one contender per "run" command, until "exit" or EOF."""
    logging.basicConfig(level=logging.ERROR)
    while True:
        try:
            tag, spec = conn.recv()
        except (EOFError, OSError):
            return
        if tag == "exit":
            return
        try:
            _contend(conn, spec)
        except Exception:
            conn.send(("error", traceback.format_exc()))


def _contend(conn: Any, spec: dict[str, Any]) -> None:
    impl, duration = spec["impl"], float(spec["duration_s"])
    with open_client(impl, spec["hosts"], spec["namespace"], spec["session_timeout_s"]) as client:
        pings = count_pings(kazoo_of(client))
        lock = make_lock(impl, client, spec["path"])
        if not acquire_bounded(lock, 30.0):  # warm-up: parents exist, code paths are hot
            raise RuntimeError("warm-up acquire timed out")
        lock.release()
        conn.send(("ready", os.getpid()))
        start_ns = wait_for_go(conn, 120.0)
        end_ns = start_ns + int(duration * 1e9)
        pings_before, cpu = pings.value, time.process_time()
        vol, invol = context_switches()
        records = array.array("q")
        timeouts = 0
        clock = time.monotonic_ns
        for _ in range(int(duration * 50_000)):  # bounded; the clock ends it long before
            if clock() >= end_ns:
                break
            if not acquire_bounded(lock, duration + 30.0):
                timeouts += 1
                break
            acquired = clock()
            releasing = clock()
            lock.release()
            records.extend((acquired, releasing, clock()))
        cpu_s = time.process_time() - cpu
        vol_after, invol_after = context_switches()
        done = {
            "records": records.tobytes(),
            "pings": pings.value - pings_before,
            "timeouts": timeouts,
            "cpu_s": cpu_s,
            "switches": (vol_after - vol, invol_after - invol),
        }
        conn.send(("done", done))
        tag, _ = conn.recv()
        if tag != "close":
            raise RuntimeError(f"expected 'close', got {tag!r}")
    conn.send(("closed", None))


@dataclasses.dataclass
class _Contended:
    cycles: int = 0
    elapsed_ns: int = 0
    handoffs: list[int] = dataclasses.field(default_factory=list)
    violations: int = 0
    packets_raw: int = 0
    packets: float = 0.0
    pings: int = 0
    timeouts: int = 0
    cpu_s: float = 0.0
    switches: tuple[int, int] = (0, 0)
    segment_cycles_per_s: list[float] = dataclasses.field(default_factory=list)
    per_process: list[int] = dataclasses.field(default_factory=list)

    def add(self, start_ns: int, done: list[dict[str, Any]], window: PacketWindow) -> None:
        timeline: list[tuple[int, int, int]] = []
        for payload in done:
            flat = array.array("q")
            flat.frombytes(payload["records"])
            rows = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
            self.per_process.append(len(rows))
            timeline += rows
            self.pings += int(payload["pings"])
            self.timeouts += int(payload["timeouts"])
            self.cpu_s += float(payload["cpu_s"])
            vol, invol = payload["switches"]
            self.switches = (self.switches[0] + int(vol), self.switches[1] + int(invol))
        timeline.sort()
        for previous, following in itertools.pairwise(timeline):
            gap = following[0] - previous[1]
            if gap < 0:
                self.violations += 1  # an acquire returned before the previous release began
            self.handoffs.append(gap)
        self.cycles += len(timeline)
        if timeline:
            elapsed = max(row[2] for row in timeline) - start_ns
            self.elapsed_ns += elapsed
            self.segment_cycles_per_s.append(round(len(timeline) / (elapsed / 1e9), 1))
        worker_pings = sum(int(p["pings"]) for p in done)
        self.packets_raw += window.raw
        self.packets += window.corrected - worker_pings

    def result(self, processes: int, duration: float) -> dict[str, Any]:
        n = max(self.cycles, 1)
        return {
            "processes": processes,
            "duration_s": duration,
            "cycles": self.cycles,
            "cycles_per_s": round(self.cycles / (self.elapsed_ns / 1e9), 1) if self.cycles else 0,
            "segment_cycles_per_s": self.segment_cycles_per_s,
            "handoff": latency_summary(self.handoffs),
            "client_cpu_ms_per_cycle": round(self.cpu_s * 1000 / n, 4),
            "context_switches_per_cycle": per_cycle_switches(*self.switches, n),
            "requests_per_cycle": round(self.packets / n, 3),
            "requests_per_cycle_uncorrected": round(self.packets_raw / n, 3),
            "worker_pings_subtracted": self.pings,
            "per_process_cycles": {"min": min(self.per_process), "max": max(self.per_process)},
            "exclusion_violations": self.violations,
            "timeouts": self.timeouts,
        }


def per_round_ratios(ours: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Ours over theirs per ABBA round: each lock's two segments of the round, averaged."""
    pairs = range(0, min(len(ours), len(theirs)) - 1, 2)
    return [
        round((ours[i] + ours[i + 1]) / (theirs[i] + theirs[i + 1]), 3)
        for i in pairs
        if theirs[i] + theirs[i + 1]
    ]


def run_contended(target: Target, s: Settings, pings: Callable[[], int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    half = s.duration_s / 2
    progress(f"contended: spawning {max(s.process_counts)} worker processes")
    with WorkerPool(max(s.process_counts), contended_worker) as pool:
        for index, processes in enumerate(s.process_counts):
            first, second = IMPLS if index % 2 == 0 else IMPLS[::-1]
            tallies = {impl: _Contended() for impl in IMPLS}
            workers = list(range(processes))
            abba = (first, second, second, first)
            for segment, impl in enumerate(abba * s.contended_rounds):
                progress(f"contended: {processes} processes, {impl}, {half:g} s (part {segment})")
                namespace, path = lock_location(target.root, impl, f"/contended/p{processes}")
                spec = {
                    "impl": impl,
                    "hosts": target.hosts,
                    "namespace": namespace,
                    "path": path,
                    "duration_s": half,
                    "session_timeout_s": s.session_timeout_s,
                }
                pool.send(workers, ("run", spec))
                pool.gather(workers, "ready", 60.0 + processes)
                with PacketWindow(target, pings) as window:
                    start_ns = pool.start_together(workers)
                    done = pool.gather(workers, "done", half + 60.0)
                pool.send(workers, ("close", None))
                pool.gather(workers, "closed", 60.0)
                tallies[impl].add(start_ns, done, window)
            measured = s.duration_s * s.contended_rounds
            entry = {impl: tallies[impl].result(processes, measured) for impl in IMPLS}
            kz, ours = entry["kazoo_lock"], entry["ours"]
            rounds = per_round_ratios(
                tallies["ours"].segment_cycles_per_s, tallies["kazoo_lock"].segment_cycles_per_s
            )
            entry["ratios"] = {
                "ours_over_kazoo_lock_cycles_per_s": ratio(
                    ours["cycles_per_s"], kz["cycles_per_s"]
                ),
                "round_ours_over_kazoo_lock_cycles_per_s": rounds,
                "median_round_ours_over_kazoo_lock_cycles_per_s": round(median(rounds), 3),
                "ours_over_kazoo_lock_handoff_p50": ratio(
                    ours["handoff"].get("p50_ms", math.nan), kz["handoff"].get("p50_ms", math.nan)
                ),
                "ours_over_kazoo_lock_handoff_p99": ratio(
                    ours["handoff"].get("p99_ms", math.nan), kz["handoff"].get("p99_ms", math.nan)
                ),
                "ours_over_kazoo_lock_requests_per_cycle": ratio(
                    ours["requests_per_cycle"], kz["requests_per_cycle"]
                ),
                "ours_over_kazoo_lock_client_cpu_per_cycle": ratio(
                    ours["client_cpu_ms_per_cycle"], kz["client_cpu_ms_per_cycle"]
                ),
                "ours_over_kazoo_lock_context_switches_per_cycle": ratio(
                    ours["context_switches_per_cycle"]["total"],
                    kz["context_switches_per_cycle"]["total"],
                ),
            }
            results[str(processes)] = entry
    return results


# -- watch notifications per release --------------------------------------------------------


def _wait_until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:g} s")
        time.sleep(0.005)


def watch_trial(target: Target, s: Settings, impl: str, length: int, admin: Any) -> dict[str, Any]:
    """Queue ``length`` waiters behind a holder, release once, count notifications."""
    namespace, path = lock_location(target.root, impl, f"/watch/q{length}")
    directory = namespace + path
    wait_limit = 60.0 + length * 0.05
    stop = threading.Event()
    acquired_ns: dict[int, int] = {}
    errors: list[str] = []
    threads: list[threading.Thread] = []

    def waiter(lock: LockLike, index: int) -> None:
        try:
            if acquire_bounded(lock, wait_limit):
                acquired_ns[index] = time.monotonic_ns()
                stop.wait(wait_limit)
                lock.release()  # teardown: the queue drains one hand-off at a time
        except Exception as exc:
            errors.append(f"waiter {index}: {exc!r}")

    def queued(count: int) -> Callable[[], bool]:
        return lambda: len(admin.get_children(directory)) >= 1 + count

    counters: list[Counter] = []
    with contextlib.ExitStack() as stack:
        holder_client = stack.enter_context(
            open_client(impl, target.hosts, namespace, s.session_timeout_s)
        )
        counters.append(count_watch_events(kazoo_of(holder_client)))
        holder = make_lock(impl, holder_client, path)
        if not acquire_bounded(holder, 30.0):
            raise RuntimeError("the holder could not take the lock")
        try:
            base_watches = target.watch_count()
            began = time.monotonic()
            for first in range(0, length, s.waiters_per_client):
                client = stack.enter_context(
                    open_client(impl, target.hosts, namespace, s.session_timeout_s)
                )
                counters.append(count_watch_events(kazoo_of(client)))
                block = range(first, min(length, first + s.waiters_per_client))
                for index in block:
                    thread = threading.Thread(
                        target=waiter, args=(make_lock(impl, client, path), index), daemon=True
                    )
                    thread.start()
                    threads.append(thread)
                _wait_until(queued(block.stop), f"{block.stop} waiters queued", wait_limit)
            _wait_until(
                lambda: target.watch_count() >= base_watches + length,
                f"{length} watches set",
                wait_limit,
            )
            queue_build_s = time.monotonic() - began
            time.sleep(0.05)
            before = sum(c.value for c in counters)
            released_ns = time.monotonic_ns()
            holder.release()
            _wait_until(lambda: bool(acquired_ns), "the next waiter's acquire", 30.0)
            time.sleep(s.settle_s)
            notifications = sum(c.value for c in counters) - before
            others = len(acquired_ns) - 1
        finally:
            # Drain the queue (each waiter releases in turn) before any client closes: a
            # waiter blocked in our acquire() does not wake when another thread closes its
            # ZkClient, it waits for its own timeout.
            stop.set()
            drain_began = time.monotonic()
            deadline = drain_began + 30.0 + length * 0.05
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            drain_s = time.monotonic() - drain_began
    return {
        "notifications": notifications,
        "handoff_ms": round((min(acquired_ns.values()) - released_ns) / 1e6, 3),
        "clients": len(counters) - 1,
        "queue_build_s": round(queue_build_s, 2),
        "queue_drain_s": round(drain_s, 2),
        "other_waiters_acquired": others,
        "waiter_errors": errors[:5],
        "threads_left": sum(t.is_alive() for t in threads),
    }


def run_watch(target: Target, s: Settings, admin: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    counts: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for index, length in enumerate(s.queue_lengths):
        counts[str(length)], details[str(length)] = {}, {}
        for impl in IMPLS if index % 2 == 0 else IMPLS[::-1]:
            progress(f"watch: {length} waiters, {impl}")
            detail = watch_trial(target, s, impl, length, admin)
            counts[str(length)][impl] = detail["notifications"]
            details[str(length)][impl] = detail
        counts[str(length)] = {impl: counts[str(length)][impl] for impl in IMPLS}
        details[str(length)] = {impl: details[str(length)][impl] for impl in IMPLS}
    return counts, details


# -- the run --------------------------------------------------------------------------------


def notes(s: Settings, target: Target, sections: Sequence[str]) -> list[str]:
    return [
        "Noisy machine: a shared 2-core box where other test suites run at the same time "
        "(load averages in meta). Absolute figures move between runs; compare the ratios "
        "from one run, where every contestant met the same noise.",
        f"uncontended: {s.rounds} rounds of {s.cycles // s.rounds} cycles per contestant in "
        f"rotating order after {s.warmup} warm-up cycles each; percentiles pool all cycles; "
        "paired_median_* ratios are medians of per-round ratios (each pair measured "
        "seconds apart), the most noise-resistant figures.",
        "requests_per_cycle = (zk_packets_received delta over the measured window - the "
        "packet each mntr read adds itself - pings our own clients sent, counted client-side "
        f"- foreign traffic at {target.foreign_rate:.2f} packets/s measured over a "
        f"{s.quiet_s:g} s quiet interval) / cycles. kazoo pings only after about a third of "
        "the session timeout of silence on a connection, so pings are rare; "
        "requests_per_cycle_uncorrected shows the figure before any correction.",
        "contended: processes are spawned once and reused; each (processes, lock) pair runs "
        f"{s.duration_s:g} s per round in two halves in ABBA order, {s.contended_rounds} "
        "round(s), each half after a start barrier on the system-wide monotonic clock; "
        "cycles_per_s is over all of a lock's halves, median_round_... the median of the "
        "per-round ratios. hand-off = next acquire-return minus previous "
        "release-call on the merged, sorted timeline of all processes (the critical "
        "section is empty); exclusion_violations counts negative hand-offs (must be 0).",
        "watch: waiters are Lock objects (each its own contender), "
        f"{s.waiters_per_client} per client, queued client by client; notifications are "
        "counted by wrapping each kazoo connection's _read_watch_event (ours: "
        f"client.kazoo_client._connection), over {s.settle_s:g} s after the next waiter's "
        "acquire returned. watch_details has the hand-off time of that one release.",
        "The throwaway server is the test harness's ZooKeeper (data on tmpfs, C1-only JVM) "
        "in real standalone mode: as a quorum of one (the harness default) ZooKeeper 3.8.0 "
        "sometimes holds a write until the client's next ping (seconds). Container checks "
        "run every 60 s (ZooKeeper's default) so our CONTAINER lock parents are not "
        "reaped mid-loop."
        if target.owned
        else f"External server {target.hosts}: other clients' traffic is subtracted as "
        "a rate measured once, so request counts are less exact.",
        "metrics_overhead: our uncontended cycle with metrics off (metrics.disable(), the "
        "path taken without prometheus-client: one None test per acquire and release) and "
        "on (recording into a registry of its own), on one client and lock, in rotating "
        f"rounds of {s.cycles // s.rounds} cycles; client CPU is process time (all threads) "
        "per cycle; paired_median_* are medians of per-round ratios.",
        f"threads: {', '.join(map(str, THREAD_COUNTS))} threads of one process, a lock object "
        "each on one path and one shared client (ours on a ZkClient, kazoo's Lock on a "
        "KazooClient; Curator's InterProcessMutex in its JVM on one CuratorFramework), each "
        f"cycling acquire+release for {s.duration_s:g} s, {s.contended_rounds} rotating "
        "round(s); client CPU is the process's (the JVM's for Curator) per cycle.",
        f"sections run: {', '.join(sections)}",
    ]


def _server_stats(target: Target) -> dict[str, str]:
    """Server-side latency and JVM pauses since the server started (to tell stalls apart)."""
    keys = ("zk_avg_latency", "zk_max_latency", "zk_max_jvm_pause_time_ms", "zk_max_fsynctime")
    try:
        mntr = target.mntr()
    except OSError:
        return {}
    return {key: mntr[key] for key in keys if key in mntr}


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_arguments(__doc__.splitlines()[0] if __doc__ else "locks", SECTIONS)
    args = parser.parse_args(argv)
    sections = parse_sections(args.sections, SECTIONS)
    s = Settings.make(args.quick)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    started, began = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    load_start = machine_meta()
    doc: dict[str, Any] = {
        "meta": {},
        "uncontended": None,
        "handoff": None,
        "contended": None,
        "threads": None,
        "watch_notifications": None,
        "watch_details": None,
        "metrics_overhead": None,
        "notes": [],
    }
    failed: list[str] = []
    with server_target(args.hosts, **SERVER_OPTIONS) as target:
        progress(f"server {target.hosts}; measuring idle traffic for {s.quiet_s:g} s")
        target.calibrate(s.quiet_s)
        admin = start_kazoo(target.hosts, s.session_timeout_s)
        admin_pings = count_pings(admin)
        try:
            zookeeper_version = target.version()
            admin.ensure_path(target.root)
            for section in sections:
                try:
                    if section == "uncontended":
                        doc["uncontended"] = run_uncontended(target, s, lambda: admin_pings.value)
                    elif section == "handoff":
                        doc["handoff"] = run_handoff(target, s)
                    elif section == "contended":
                        doc["contended"] = run_contended(target, s, lambda: admin_pings.value)
                    elif section == "threads":
                        doc["threads"] = run_threads(target, s, lambda: admin_pings.value)
                    elif section == "metrics":
                        doc["metrics_overhead"] = run_metrics(target, s)
                    else:
                        doc["watch_notifications"], doc["watch_details"] = run_watch(
                            target, s, admin
                        )
                except Exception as exc:
                    traceback.print_exc()
                    failed.append(f"section {section} failed: {exc!r}")
        finally:
            server_stats = _server_stats(target)
            target.remove_root(admin)
            stop_kazoo(admin)
        doc["meta"] = {
            "benchmark": "locks",
            "started_at": started.isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - began, 1),
            "quick": args.quick,
            "sections": sections,
            "machine": {**load_start, "load_avg_end": load_average()},
            "python": sys.version.split()[0],
            "python_implementation": sys.implementation.name,
            "kazoo_version": importlib.metadata.version("kazoo"),
            "zk_recipes_version": zk_recipes.__version__,
            "zookeeper_version": zookeeper_version,
            "server": {
                "hosts": target.hosts,
                "own_throwaway_server": target.owned,
                "options": target.options,
                "mntr_overhead_packets": target.mntr_overhead,
                "foreign_packets_per_s": round(target.foreign_rate, 3),
            },
            "settings": dataclasses.asdict(s),
            "server_stats_at_end": server_stats,
        }
        doc["notes"] = notes(s, target, sections) + failed
        max_latency = float(server_stats.get("zk_max_latency", 0))
        if max_latency > 500:
            doc["notes"].append(
                f"The server once took {max_latency:g} ms to answer a request (zk_max_latency): "
                "a server-side stall hit this run; p99/max include it, p50 and ratios less so."
            )
    emit(doc, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
