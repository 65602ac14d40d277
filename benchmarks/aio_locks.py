"""asyncio lock benchmark: ``aio.Lock`` beside our sync Lock and kazoo's Lock, in one run.

    python benchmarks/aio_locks.py [--quick] [--out FILE] [--hosts HOST:PORT]
                                   [--sections uncontended,waiters]

Prints one JSON document on stdout (progress on stderr). See benchmarks/README.md.

- **uncontended**: one client, acquire+release in a loop: our sync ``Lock``,
  ``aio.Lock`` on one event loop (asyncio's own, and uvloop's where it is
  installed: ``aio_uvloop``), and kazoo's ``Lock``, interleaved in rotating
  rounds. Median cycle time and client CPU per cycle (the process's, every
  thread's); the asyncio hop's cost is ``aio / sync`` (``aio_uvloop_over_sync``
  on uvloop).
- **waiters**: N contenders queued at once on one lock, then on 10 locks, each
  taking its lock once: coroutines on one loop (an ``aio.Lock`` each) against
  threads (a sync ``Lock`` each), one client. Throughput, hand-off latency
  (the next holder's acquire return minus the previous holder's release
  call, per lock), the most threads the process had and its RSS growth; each
  of the four in a fresh process.

Never asserts timings: benchmarks measure, tests check counts.
"""

from __future__ import annotations

import asyncio
import datetime
import multiprocessing
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    base_arguments,
    emit,
    latency_summary,
    machine_meta,
    median,
    parse_sections,
    progress,
    ratio,
    rotating_rounds,
    server_target,
)
from kazoo.client import KazooClient

from zk_recipes import Lock, ZkClient, aio

SECTIONS = ("uncontended", "waiters")
#: The throwaway server as benchmarks/locks.py runs it (its containers reaped rarely).
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _timed(cycles: int, body: Callable[[], None]) -> tuple[float, float]:
    """(wall ms per cycle, process CPU µs per cycle) of ``body`` run ``cycles`` times."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(cycles):
        body()
    return (
        (time.perf_counter() - wall) / cycles * 1e3,
        (time.process_time() - cpu) / cycles * 1e6,
    )


def _uvloop_loop() -> asyncio.AbstractEventLoop | None:
    """A new uvloop loop, or None where uvloop is not installed (it is optional)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop()


async def _made_on_loop(client: ZkClient, path: str) -> aio.Lock:
    return aio.Lock(client, path)


def uncontended(hosts: str, root: str, quick: bool) -> dict[str, Any]:
    rounds, cycles = (4, 100) if quick else (9, 400)
    ours = ZkClient(hosts).start()
    kazoo = KazooClient(hosts)
    kazoo.start()
    loop = asyncio.new_event_loop()
    uv_loop = _uvloop_loop()
    try:
        sync_lock = Lock(ours, f"{root}/u-sync")
        kazoo_lock = kazoo.Lock(f"{root}/u-kazoo")

        def sync_cycle() -> None:
            sync_lock.acquire()
            sync_lock.release()

        def aio_round(on: asyncio.AbstractEventLoop, path: str) -> Callable[[int], Any]:
            lock = on.run_until_complete(_made_on_loop(ours, path))  # an aio.Lock serves a loop

            async def cycles(n: int) -> None:
                for _ in range(n):
                    await lock.acquire()
                    await lock.release()

            def timed(n: int) -> tuple[float, float]:
                cpu, wall = time.process_time(), time.perf_counter()
                on.run_until_complete(cycles(n))
                return (
                    (time.perf_counter() - wall) / n * 1e3,
                    (time.process_time() - cpu) / n * 1e6,
                )

            return timed

        def kazoo_cycle() -> None:
            kazoo_lock.acquire()
            kazoo_lock.release()

        runs: dict[str, Callable[[int], tuple[float, float]]] = {
            "sync": lambda n: _timed(n, sync_cycle),
            "aio": aio_round(loop, f"{root}/u-aio"),
            "kazoo": lambda n: _timed(n, kazoo_cycle),
        }
        if uv_loop is not None:
            runs["aio_uvloop"] = aio_round(uv_loop, f"{root}/u-aio-uvloop")
        for run in runs.values():
            run(cycles // 4)  # warm up
        wall: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for index, order in rotating_rounds(list(runs), rounds):
            for name in order:
                ms, us = runs[name](cycles)
                wall[name].append(ms)
                cpu[name].append(us)
            progress(f"uncontended round {index + 1}/{rounds}")
        result: dict[str, Any] = {
            name: {
                "cycle_ms_median": round(median(wall[name]), 4),
                "client_cpu_us_per_cycle_median": round(median(cpu[name]), 1),
                "rounds_ms": [round(x, 4) for x in wall[name]],
            }
            for name in runs
        }
        result["aio_over_sync"] = ratio(median(wall["aio"]), median(wall["sync"]))
        result["aio_cpu_over_sync"] = ratio(median(cpu["aio"]), median(cpu["sync"]))
        if uv_loop is not None:
            result["aio_uvloop_over_sync"] = ratio(median(wall["aio_uvloop"]), median(wall["sync"]))
            result["aio_uvloop_cpu_over_sync"] = ratio(
                median(cpu["aio_uvloop"]), median(cpu["sync"])
            )
        result["sync_speedup_vs_kazoo"] = ratio(median(wall["kazoo"]), median(wall["sync"]))
        result["aio_speedup_vs_kazoo"] = ratio(median(wall["kazoo"]), median(wall["aio"]))
        return result
    finally:
        loop.close()
        if uv_loop is not None:
            uv_loop.close()
        ours.close()
        kazoo.stop()
        kazoo.close()


class _Timeline:
    """Per lock, the release calls and acquire returns, for hand-off latencies."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.events: list[tuple[int, str, int]] = []  # (ns, "got"|"free", lock index)
        self.most_threads = threading.active_count()

    def note(self, kind: str, index: int) -> None:
        now = time.monotonic_ns()
        with self.guard:
            self.events.append((now, kind, index))
            self.most_threads = max(self.most_threads, threading.active_count())

    def handoffs_ns(self) -> list[int]:
        last_free: dict[int, int] = {}
        out = []
        for ns, kind, index in sorted(self.events):
            if kind == "free":
                last_free[index] = ns
            elif index in last_free:
                out.append(ns - last_free.pop(index))
        return out


def _waiters_with_coroutines(client: ZkClient, paths: list[str], n: int) -> dict[str, Any]:
    timeline = _Timeline()
    rss_before = _rss_kib()
    threads_before = threading.active_count()

    async def one(index: int) -> None:
        lock = aio.Lock(client, paths[index % len(paths)])
        await lock.acquire()
        timeline.note("got", index % len(paths))
        await asyncio.sleep(0)
        timeline.note("free", index % len(paths))
        await lock.release()

    async def all_of_them() -> None:
        await asyncio.gather(*(one(index) for index in range(n)))

    started = time.perf_counter()
    asyncio.run(all_of_them())
    return _waiters_result(timeline, n, time.perf_counter() - started, threads_before, rss_before)


def _waiters_with_threads(client: ZkClient, paths: list[str], n: int) -> dict[str, Any]:
    timeline = _Timeline()
    rss_before = _rss_kib()
    threads_before = threading.active_count()
    go = threading.Event()

    def one(index: int) -> None:
        lock = Lock(client, paths[index % len(paths)])
        go.wait()
        lock.acquire()
        timeline.note("got", index % len(paths))
        timeline.note("free", index % len(paths))
        lock.release()

    workers = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for worker in workers:
        worker.start()
    started = time.perf_counter()
    go.set()
    for worker in workers:
        worker.join()
    return _waiters_result(timeline, n, time.perf_counter() - started, threads_before, rss_before)


def _waiters_result(
    timeline: _Timeline, n: int, seconds: float, threads_before: int, rss_before: int
) -> dict[str, Any]:
    return {
        "acquisitions": n,
        "seconds": round(seconds, 3),
        "acquisitions_per_s": round(n / seconds, 1),
        "handoff": latency_summary(timeline.handoffs_ns()),
        "threads_before": threads_before,
        "most_threads": timeline.most_threads,
        "rss_growth_kib": _rss_kib() - rss_before,
    }


def _one_scenario(hosts: str, paths: list[str], n: int, kind: str) -> dict[str, Any]:
    """In a fresh process: its threads and RSS are the scenario's alone."""
    run = _waiters_with_coroutines if kind == "coroutines" else _waiters_with_threads
    with ZkClient(hosts) as client:
        return run(client, paths, n)


def waiters(hosts: str, root: str, quick: bool) -> dict[str, Any]:
    n = 200 if quick else 1000
    result: dict[str, Any] = {"contenders": n}
    context = multiprocessing.get_context("spawn")
    for locks in (1, 10):
        paths = [f"{root}/w{locks}-{index}" for index in range(locks)]
        for kind in ("coroutines", "threads"):
            progress(f"waiters: {n} {kind} on {locks} lock(s), in a process of their own")
            with context.Pool(1) as pool:
                result[f"{kind}_on_{locks}"] = pool.apply(_one_scenario, (hosts, paths, n, kind))
        result[f"throughput_coroutines_over_threads_on_{locks}"] = ratio(
            result[f"coroutines_on_{locks}"]["acquisitions_per_s"],
            result[f"threads_on_{locks}"]["acquisitions_per_s"],
        )
    return result


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0], SECTIONS)
    args = parser.parse_args()
    sections = parse_sections(args.sections, SECTIONS)
    document: dict[str, Any] = {
        "benchmark": "aio_locks",
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_meta(),
        "quick": args.quick,
        "pool_threads": aio.POOL_THREADS,
    }
    with server_target(args.hosts, **SERVER_OPTIONS) as target:
        document["server"] = target.version()
        if "uncontended" in sections:
            document["uncontended"] = uncontended(target.hosts, target.root, args.quick)
        if "waiters" in sections:
            document["waiters"] = waiters(target.hosts, target.root, args.quick)
    emit(document, args.out)


if __name__ == "__main__":
    main()
