"""Celery overhead: what ``@singleton_task`` adds to a task run, against one raw lock cycle.

    python benchmarks/celery_overhead.py [--quick] [--tasks N] [--out FILE] [--hosts HOST:PORT]
                                         [--no-peer]

Prints one JSON document on stdout (progress on stderr). See benchmarks/README.md
for what each figure means. One run, one worker, everything interleaved:

- a throwaway ZooKeeper (or ``--hosts``), a throwaway ``redis-server`` (broker and
  result backend) and ONE ``celery worker -P solo`` (tasks run in its main
  process) on an app module written to a temporary directory;
- the worker times every task from ``task_prerun`` to ``task_postrun``
  (``time.perf_counter_ns``). Our lock is taken and released inside the traced
  call, so that is the worker-side cost of a run, lock included;
- task kinds: ``plain`` (no decorator), ``singleton`` (``@singleton_task``, one
  lock per task name), ``singleton_keyed`` (``@singleton_task(key=["i"])``, a new
  key every call: container parents are created each time) and, if installed,
  ``celery_singleton`` (``base=celery_singleton.Singleton`` on the same Redis: a
  different design that locks at publish). Sent one at a time (each waits for
  its result: end-to-end latency in the client), in an order rotated every
  iteration;
- in the same iterations, in this process: one ``zk_recipes.Lock`` cycle
  (``Lock(client, path).acquire(blocking=False)`` + ``release()``, a new Lock
  object each time as the decorator does) on a fixed path and on a new path,
  and kazoo's raw create ephemeral-sequential + delete (the 2-round-trip floor).

overhead = p50(singleton) - p50(plain), worker side; the issue's target is
overhead / p50(lock cycle) <= 1.2. Never asserts timings.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import functools
import gc
import importlib
import importlib.metadata
import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import (
    PacketWindow,
    Target,
    count_pings,
    emit,
    latency_summary,
    load_average,
    machine_meta,
    median,
    percentile,
    progress,
    ratio,
    rotating_rounds,
    server_target,
)
from kazoo.client import KazooClient

import zk_recipes
from zk_recipes import Lock, ZkClient
from zk_recipes_celery.testing import RedisServer

#: As in locks.py: real standalone mode (the harness's quorum of one sometimes holds a
#: write until the next ping), and ZooKeeper's default container check interval.
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}
APP_MODULE = "zk_bench_celery_app"
TASKS = ("plain", "singleton", "singleton_keyed")
PEER = "celery_singleton"
LOCAL = ("lock_cycle", "lock_cycle_new_key", "raw_floor")
#: The issue's target for overhead / lock cycle.
TARGET_RATIO = 1.2

APP_TEMPLATE = '''\
"""Celery app of benchmarks/celery_overhead.py (written per run, imported by both sides)."""

import time

from celery import Celery, signals

from zk_recipes_celery import singleton_task

app = Celery("zk_bench", broker={redis_url!r}, backend={redis_url!r})
app.conf.update(
    zk_recipes_hosts={zk_hosts!r},
    zk_recipes_session_timeout={session_timeout!r},
    zk_recipes_prefix={zk_prefix!r},
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    singleton_backend_url={redis_url!r},
)

_started = {{}}
_durations = {{}}


@signals.task_prerun.connect(weak=False)
def _prerun(task_id=None, **kwargs):
    _started[task_id] = (time.perf_counter_ns(), time.process_time_ns())


@signals.task_postrun.connect(weak=False)
def _postrun(task_id=None, **kwargs):
    end, cpu_end = time.perf_counter_ns(), time.process_time_ns()
    start = _started.pop(task_id, None)
    if start is not None:
        _durations[task_id] = (end - start[0], cpu_end - start[1])


@app.task(name="bench.collect")
def collect():
    """Worker-side (wall, CPU) ns by task id, recorded since the last collect."""
    found = dict(_durations)
    _durations.clear()
    return found


@app.task(name="bench.plain")
def plain(i):
    return i


@app.task(name="bench.singleton")
@singleton_task
def singleton(i):
    return i


@app.task(name="bench.singleton_keyed")
@singleton_task(key=["i"])
def singleton_keyed(i):
    return i


try:
    from celery_singleton import Singleton
except ImportError:
    celery_singleton = None
else:

    @app.task(name="bench.celery_singleton", base=Singleton)
    def celery_singleton(i):
        return i
'''


@dataclasses.dataclass(frozen=True)
class Settings:
    tasks: int
    warmup: int
    rounds: int
    count_tasks: int
    session_timeout_s: float
    result_timeout_s: float
    quiet_s: float

    @classmethod
    def make(cls, quick: bool, tasks: int | None) -> Settings:
        if quick:
            return cls(tasks or 20, 5, 2, 10, 10.0, 30.0, 0.3)
        return cls(tasks or 300, 20, 5, 50, 10.0, 30.0, 1.0)


# -- processes ------------------------------------------------------------------------------


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM the process group we started (its own session), then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A throwaway redis-server on loopback (the test harness's), no persistence; yields its URL."""
    with RedisServer(directory / "redis") as server:
        yield f"{server.url}/0"


@contextlib.contextmanager
def celery_worker(directory: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """One ``celery worker -P solo`` on the app module in ``directory``."""
    log_path = directory / "worker.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(directory), env.get("PYTHONPATH", "")) if p)
    argv = [
        sys.executable, "-m", "celery", "-A", APP_MODULE, "worker",
        "-P", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat",
        "--loglevel", "WARNING", "-n", f"bench-{uuid.uuid4().hex[:8]}@%h",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc, log_path
    finally:
        stop_process(proc)


def write_app(directory: Path, redis_url: str, zk_hosts: str, zk_prefix: str, s: Settings) -> None:
    text = APP_TEMPLATE.format(
        redis_url=redis_url,
        zk_hosts=zk_hosts,
        zk_prefix=zk_prefix,
        session_timeout=s.session_timeout_s,
    )
    (directory / f"{APP_MODULE}.py").write_text(text)


def import_app(directory: Path) -> types.ModuleType:
    sys.path.insert(0, str(directory))
    sys.modules.pop(APP_MODULE, None)
    return importlib.import_module(APP_MODULE)


def wait_ready(
    module: types.ModuleType, proc: subprocess.Popen[bytes], log_path: Path, timeout: float
) -> None:
    """Send ``collect`` and wait for its answer: the worker is then consuming."""
    result = module.collect.apply_async()
    deadline = time.monotonic() + timeout
    while not result.ready():
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}):\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no worker answer within {timeout:g} s:\n{tail(log_path)}")
        time.sleep(0.05)
    result.get(timeout=5)


# -- measuring ------------------------------------------------------------------------------


@dataclasses.dataclass
class Samples:
    """Per kind: task ids (worker-side times come back by id), end-to-end and local ns."""

    ids: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    e2e_ns: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    local_ns: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    local_cpu_ns: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    round_of: dict[str, int] = dataclasses.field(default_factory=dict)


def make_senders(
    module: types.ModuleType, kinds: Sequence[str], timeout: float
) -> dict[str, Callable[[int], tuple[str, int]]]:
    """One callable per task kind: send one task, wait for its result; (task id, e2e ns)."""

    def sender(task: Any) -> Callable[[int], tuple[str, int]]:
        def send(i: int) -> tuple[str, int]:
            start = time.perf_counter_ns()
            result = task.apply_async(args=(i,))
            value = result.get(timeout=timeout)
            elapsed = time.perf_counter_ns() - start
            if value != i:
                raise RuntimeError(f"{task.name}({i}) returned {value!r} (skipped by a lock?)")
            return str(result.id), elapsed

        return send

    return {kind: sender(getattr(module, kind)) for kind in kinds}


def make_local_cycles(client: ZkClient, kz: Any, base: str) -> dict[str, Callable[[], object]]:
    """The in-process cycles: our Lock on a fixed and on a new path, and the raw floor."""
    fixed = f"{base}/lock/fixed"
    keys = itertools.count()
    raw_dir = f"{base}/raw"
    kz.ensure_path(raw_dir)

    def lock_cycle(path: Callable[[], str]) -> Callable[[], None]:
        def cycle() -> None:
            lock = Lock(client, path())
            if not lock.acquire(blocking=False):
                raise RuntimeError(f"uncontended lock {lock.path} not acquired")
            lock.release()

        return cycle

    def raw_cycle() -> None:
        kz.delete(kz.create(f"{raw_dir}/n-", ephemeral=True, sequence=True))

    return {
        "lock_cycle": lock_cycle(lambda: fixed),
        "lock_cycle_new_key": lock_cycle(lambda: f"{base}/lock/keys/k{next(keys)}"),
        "raw_floor": raw_cycle,
    }


def timed(cycle: Callable[[], object]) -> tuple[int, int]:
    """(wall, CPU of this whole process, kazoo's threads included) ns of one cycle."""
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    cycle()
    return time.perf_counter_ns() - start, time.process_time_ns() - cpu


def run_interleaved(
    senders: dict[str, Callable[[int], tuple[str, int]]],
    local: dict[str, Callable[[], object]],
    s: Settings,
    counter: Iterator[int],
) -> Samples:
    names = list(senders) + list(local)
    samples = Samples(
        ids={k: [] for k in senders},
        e2e_ns={k: [] for k in senders},
        local_ns={k: [] for k in local},
        local_cpu_ns={k: [] for k in local},
    )
    per_round = max(1, s.tasks // s.rounds)
    gc.collect()
    for iteration, order in rotating_rounds(names, s.tasks):
        if iteration % per_round == 0:
            progress(f"interleaved: iteration {iteration + 1}/{s.tasks}")
        for name in order:
            if name in senders:
                task_id, elapsed = senders[name](next(counter))
                samples.ids[name].append(task_id)
                samples.e2e_ns[name].append(elapsed)
                samples.round_of[task_id] = min(iteration // per_round, s.rounds - 1)
            else:
                wall, cpu = timed(local[name])
                samples.local_ns[name].append(wall)
                samples.local_cpu_ns[name].append(cpu)
    return samples


def count_requests(
    target: Target,
    senders: dict[str, Callable[[int], tuple[str, int]]],
    local: dict[str, Callable[[], object]],
    pings: Callable[[], int],
    s: Settings,
    counter: Iterator[int],
) -> dict[str, Any]:
    """Server packets per task (per cycle) of each kind, over ``count_tasks`` in a row.

    The worker's own pings are not counted client-side (it is another process): it pings
    only after about a third of its session timeout of silence, so at most a few land in
    a window, mostly in ``plain``'s (the worker's ZooKeeper client is idle there).
    """
    result: dict[str, Any] = {}
    runs: dict[str, Callable[[], object]] = {
        kind: functools.partial(lambda send: send(next(counter)), send)
        for kind, send in senders.items()
    }
    runs.update(local)
    for kind, run in runs.items():
        with PacketWindow(target, pings) as window:
            for _ in range(s.count_tasks):
                run()
        result[kind] = {
            "n": s.count_tasks,
            "requests_each": round(window.corrected / s.count_tasks, 3),
            "requests_each_uncorrected": round(window.raw / s.count_tasks, 3),
        }
    return result


# -- the figures ----------------------------------------------------------------------------


def summary(samples_ns: Sequence[int]) -> dict[str, float]:
    figures = latency_summary(samples_ns)
    figures.pop("mean_ms", None)
    return figures


def ms(value_ns: float) -> float:
    return round(value_ns / 1e6, 4)


def paired_median_ns(a: Sequence[int], b: Sequence[int]) -> float:
    """Median over iterations of a_i - b_i (both measured seconds apart, same iteration)."""
    return median([float(x - y) for x, y in zip(a, b, strict=True)])


def figures(
    samples: Samples, worker_ns: dict[str, list[int]], s: Settings, peer: bool
) -> dict[str, Any]:
    worker: dict[str, list[int]] = {}
    worker_cpu: dict[str, list[int]] = {}
    rounds: dict[str, list[list[int]]] = {}
    missing = 0
    for kind, ids in samples.ids.items():
        worker[kind], worker_cpu[kind] = [], []
        rounds[kind] = [[] for _ in range(s.rounds)]
        for task_id in ids:
            value = worker_ns.get(task_id)
            if value is None:
                missing += 1
                continue
            wall, cpu = value
            worker[kind].append(wall)
            worker_cpu[kind].append(cpu)
            rounds[kind][samples.round_of[task_id]].append(wall)
    if missing:
        raise RuntimeError(f"{missing} tasks have no worker-side time")

    p50 = {kind: percentile(sorted(v), 50) for kind, v in worker.items()}
    e2e_p50 = {kind: percentile(sorted(v), 50) for kind, v in samples.e2e_ns.items()}
    local_p50 = {kind: percentile(sorted(v), 50) for kind, v in samples.local_ns.items()}
    lock_cycle, lock_new = local_p50["lock_cycle"], local_p50["lock_cycle_new_key"]
    cpu_p50 = {kind: median(v) for kind, v in worker_cpu.items()}
    local_cpu_p50 = {kind: median(v) for kind, v in samples.local_cpu_ns.items()}

    overhead = {
        "singleton_ms": ms(p50["singleton"] - p50["plain"]),
        "singleton_keyed_ms": ms(p50["singleton_keyed"] - p50["plain"]),
        "paired_singleton_ms": ms(paired_median_ns(worker["singleton"], worker["plain"])),
        "paired_singleton_keyed_ms": ms(
            paired_median_ns(worker["singleton_keyed"], worker["plain"])
        ),
        "cpu_singleton_ms": ms(cpu_p50["singleton"] - cpu_p50["plain"]),
        "cpu_singleton_keyed_ms": ms(cpu_p50["singleton_keyed"] - cpu_p50["plain"]),
        "round_singleton_ms": [
            ms(median(r) - median(p))
            for r, p in zip(rounds["singleton"], rounds["plain"], strict=True)
            if r and p
        ],
    }
    doc: dict[str, Any] = {
        "worker_side": {
            kind: {**summary(v), "round_p50_ms": [ms(median(r)) for r in rounds[kind] if r]}
            for kind, v in worker.items()
        },
        "end_to_end": {kind: summary(v) for kind, v in samples.e2e_ns.items()},
        "in_process": {
            kind: {**summary(v), "cpu_p50_ms": ms(local_cpu_p50[kind])}
            for kind, v in samples.local_ns.items()
        },
        "worker_cpu_p50_ms": {kind: ms(v) for kind, v in cpu_p50.items()},
        "overhead": overhead,
        "ratios": {
            "target": TARGET_RATIO,
            "singleton_overhead_over_lock_cycle": ratio(
                p50["singleton"] - p50["plain"], lock_cycle
            ),
            "paired_singleton_overhead_over_lock_cycle": ratio(
                paired_median_ns(worker["singleton"], worker["plain"]), lock_cycle
            ),
            "keyed_overhead_over_lock_cycle_new_key": ratio(
                p50["singleton_keyed"] - p50["plain"], lock_new
            ),
            "keyed_overhead_over_lock_cycle": ratio(
                p50["singleton_keyed"] - p50["plain"], lock_cycle
            ),
            "lock_cycle_over_raw_floor": ratio(lock_cycle, local_p50["raw_floor"]),
            "lock_cycle_new_key_over_lock_cycle": ratio(lock_new, lock_cycle),
            "singleton_cpu_overhead_over_lock_cycle_cpu": ratio(
                cpu_p50["singleton"] - cpu_p50["plain"], local_cpu_p50["lock_cycle"]
            ),
        },
        "end_to_end_overhead": {
            "singleton_ms": ms(e2e_p50["singleton"] - e2e_p50["plain"]),
            "singleton_keyed_ms": ms(e2e_p50["singleton_keyed"] - e2e_p50["plain"]),
        },
    }
    ratio_value = doc["ratios"]["singleton_overhead_over_lock_cycle"]
    doc["ratios"]["meets_target"] = ratio_value is not None and ratio_value <= TARGET_RATIO
    if peer:
        doc["celery_singleton"] = {
            "design": "celery-singleton: Redis SET NX at publish (apply_async, in the "
            "client), DELETE in on_success/on_failure (in the worker, after the result is "
            "stored); no crash safety (a dead worker leaves the key until its TTL, none "
            "by default). Compare end to end, not worker side.",
            "end_to_end_overhead_ms": ms(e2e_p50[PEER] - e2e_p50["plain"]),
            "paired_end_to_end_overhead_ms": ms(
                paired_median_ns(samples.e2e_ns[PEER], samples.e2e_ns["plain"])
            ),
            "worker_side_overhead_ms": ms(p50[PEER] - p50["plain"]),
            "ours_end_to_end_overhead_ms": doc["end_to_end_overhead"]["singleton_ms"],
            "ours_paired_end_to_end_overhead_ms": ms(
                paired_median_ns(samples.e2e_ns["singleton"], samples.e2e_ns["plain"])
            ),
        }
    return doc


def notes(s: Settings, target: Target, peer: str) -> list[str]:
    return [
        "Noisy machine: a shared 2-core box (load averages in meta). Absolute figures move "
        "between runs; compare the overheads and ratios from one run.",
        f"{s.tasks} tasks of each kind after {s.warmup} warm-up ones, one at a time (each "
        "waits for its result), interleaved with the in-process cycles in an order rotated "
        "every iteration. worker_side = task_postrun minus task_prerun in the worker "
        "(perf_counter_ns); it includes Celery's tracing and the result store, alike for "
        "every kind, and our lock, which runs inside the traced call. round_* split the "
        f"iterations into {s.rounds} consecutive rounds.",
        "overhead.*_ms = p50(kind) - p50(plain), worker side; paired_* = median over "
        "iterations of (kind - plain), each pair measured in the same iteration. "
        "ratios.singleton_overhead_over_lock_cycle is the issue's figure (target <= "
        f"{TARGET_RATIO:g}): the decorator's whole cost against one in-process Lock cycle.",
        "in_process: lock_cycle = Lock(client, path).acquire(blocking=False) + release(), a "
        "new Lock object per cycle on one path (3 requests, 2 round trips); "
        "lock_cycle_new_key = the same on a new path each time (its parent container is "
        "created first, as for a new singleton key); raw_floor = kazoo create "
        "ephemeral-sequential + delete (2 requests, 2 round trips).",
        "requests: server packets per task over a run of tasks of one kind (zk_packets_"
        "received, minus mntr's own packet, our clients' pings and foreign traffic). The "
        "worker's pings are not subtracted: a few in plain's window are pings, not requests.",
        peer,
        "The throwaway server is the test harness's ZooKeeper in real standalone mode, "
        "container checks every 60 s (as in locks.py)."
        if target.owned
        else f"External server {target.hosts}.",
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "celery overhead").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 tasks of each kind")
    parser.add_argument("--tasks", type=int, help="tasks of each kind (default 300)")
    parser.add_argument("--out", type=Path, help="also write the JSON document to this file")
    parser.add_argument(
        "--hosts",
        help="one existing ZooKeeper HOST:PORT (four-letter words mntr and srvr allowed) "
        "instead of a throwaway server",
    )
    parser.add_argument(
        "--no-peer", action="store_true", help="leave celery-singleton out even if installed"
    )
    args = parser.parse_args(argv)
    if args.tasks is not None and args.tasks < 2:
        parser.error("--tasks must be at least 2")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    s = Settings.make(args.quick, args.tasks)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    started, began = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    load_start = machine_meta()
    doc: dict[str, Any] = {"meta": {}, "results": None, "requests": None, "notes": []}
    failed: list[str] = []
    peer_note = "celery-singleton: left out (--no-peer)."
    peer_version: str | None = None
    zookeeper_version = ""
    with contextlib.ExitStack() as stack:
        directory = Path(tempfile.mkdtemp(prefix="zk-bench-celery-"))
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        target = stack.enter_context(server_target(args.hosts, **SERVER_OPTIONS))
        progress(f"server {target.hosts}")
        target.calibrate(s.quiet_s)
        zookeeper_version = target.version()
        admin = KazooClient(hosts=target.hosts, timeout=s.session_timeout_s)
        admin.start(timeout=30)

        def cleanup() -> None:
            target.remove_root(admin)
            admin.stop()
            admin.close()

        stack.callback(cleanup)
        admin.ensure_path(target.root)
        redis_url = stack.enter_context(redis_server(directory))
        progress(f"redis {redis_url}")
        write_app(directory, redis_url, target.hosts, f"{target.root}/celery", s)
        proc, log_path = stack.enter_context(celery_worker(directory))
        try:
            module = import_app(directory)
            kinds = list(TASKS)
            if args.no_peer:
                pass
            elif module.celery_singleton is None:
                peer_note = "celery-singleton: not installed, left out."
            else:
                kinds.append(PEER)
                peer_version = importlib.metadata.version("celery-singleton")
                peer_note = (
                    f"celery-singleton {peer_version}: base=Singleton, default unique_on (all "
                    "arguments, a new i each call, so never a duplicate), same Redis as the "
                    "broker. It locks at publish, so only its end-to-end overhead is "
                    "comparable with ours."
                )
            progress("waiting for the worker")
            wait_ready(module, proc, log_path, 90.0)
            client = stack.enter_context(
                ZkClient(target.hosts, session_timeout=s.session_timeout_s)
            )
            kz = KazooClient(hosts=target.hosts, timeout=s.session_timeout_s)
            kz.start(timeout=30)
            stack.callback(kz.close)
            stack.callback(kz.stop)
            senders = make_senders(module, kinds, s.result_timeout_s)
            local = make_local_cycles(client, kz, f"{target.root}/local")
            counter = itertools.count()
            progress(f"warm-up: {s.warmup} of each")
            for _ in range(s.warmup):
                for send in senders.values():
                    send(next(counter))
                for cycle in local.values():
                    cycle()
            module.collect.apply_async().get(timeout=s.result_timeout_s)  # drop warm-up
            samples = run_interleaved(senders, local, s, counter)
            worker_ns = module.collect.apply_async().get(timeout=s.result_timeout_s)
            doc["results"] = figures(samples, worker_ns, s, PEER in kinds)
            progress(f"requests: {s.count_tasks} tasks of each kind")
            ping_counters = [count_pings(c) for c in (admin, kz, client.kazoo_client)]
            doc["requests"] = count_requests(
                target, senders, local, lambda: sum(c.value for c in ping_counters), s, counter
            )
        except Exception as exc:
            traceback.print_exc()
            failed.append(f"run failed: {exc!r}")
            failed.append(f"worker log tail:\n{tail(log_path)}")
        server_stats: dict[str, str] = {}
        with contextlib.suppress(Exception):
            mntr = target.mntr()
            server_stats = {k: mntr[k] for k in ("zk_avg_latency", "zk_max_latency") if k in mntr}
    doc["meta"] = {
        "benchmark": "celery_overhead",
        "started_at": started.isoformat(timespec="seconds"),
        "elapsed_s": round(time.monotonic() - began, 1),
        "quick": args.quick,
        "machine": {**load_start, "load_avg_end": load_average()},
        "python": sys.version.split()[0],
        "celery_version": importlib.metadata.version("celery"),
        "kombu_version": importlib.metadata.version("kombu"),
        "redis_py_version": importlib.metadata.version("redis"),
        "kazoo_version": importlib.metadata.version("kazoo"),
        "celery_singleton_version": peer_version,
        "zk_recipes_version": zk_recipes.__version__,
        "zookeeper_version": zookeeper_version,
        "server": {
            "hosts": target.hosts,
            "own_throwaway_server": target.owned,
            "options": target.options,
        },
        "settings": dataclasses.asdict(s),
        "server_stats_at_end": server_stats,
    }
    doc["notes"] = notes(s, target, peer_note) + failed
    emit(doc, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
