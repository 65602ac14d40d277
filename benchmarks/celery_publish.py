"""Publish-side cost of one ``.delay()``: plain, ours with ``unique_on_publish``, celery-singleton.

    python benchmarks/celery_publish.py [--quick|--tiny] [--runs N] [--out FILE] [--hosts HOST:PORT]
                                        [--no-peer]

Prints one JSON document on stdout (progress on stderr). One process, one
throwaway ZooKeeper (or ``--hosts``) and one throwaway ``redis-server`` (the
broker; no worker: messages pile up and are flushed between rounds). The
same app publishes, in rotating order, ``--runs`` times:

- ``plain``: a task without any decorator (the broker round trip alone);
- ``ours``: ``@singleton_task(key=["i"], unique_on_publish=True)``:
  ``first``, N publishes of N keys (each creates its marker, then sends),
  and ``duplicate``, N publishes of one key already queued (each meets the
  marker, reads it and sends nothing);
- ``celery_singleton`` (when ``celery-singleton`` is installed; ``--no-peer``
  leaves it out): ``base=Singleton, unique_on=["i"]`` on the same Redis, the
  same ``first`` and ``duplicate``.

Per publish: median latency (µs, each ``.delay()`` timed alone), ZooKeeper
requests (``mntr``'s packets), and the process's CPU. Never asserts timings.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from _common import (
    Target,
    base_arguments,
    emit,
    machine_meta,
    median,
    progress,
    ratio,
    rotating_rounds,
    server_target,
)
from celery import Celery

import zk_recipes
import zk_recipes_celery
from zk_recipes_celery import singleton_task
from zk_recipes_celery.testing import RedisServer

PEER = "celery_singleton"


def _plain(i: int) -> int:
    return i


def _app(redis_url: str, target: Target, peer: bool) -> tuple[Any, dict[str, Any]]:
    app: Any = Celery("zk_publish_bench", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.zk_recipes_hosts = target.hosts
    app.conf.zk_recipes_prefix = f"{target.root}/celery"
    app.conf.zk_recipes_session_timeout = 30.0  # no ping inside a measured window
    app.conf.singleton_backend_url = redis_url
    tasks: dict[str, Any] = {
        "plain": app.task(name="bench.plain")(_plain),
        "ours": app.task(name="bench.ours")(
            singleton_task(key=["i"], unique_on_publish=True)(_plain)
        ),
    }
    if peer:
        singleton = importlib.import_module(PEER).Singleton
        tasks[PEER] = app.task(name="bench.celery_singleton", base=singleton, unique_on=["i"])(
            _plain
        )
    return app, tasks


def _measure(target: Target, publish: Callable[[int], object], count: int) -> dict[str, float]:
    latencies: list[float] = []
    before, cpu = target.packets(), time.process_time()
    for i in range(count):
        started = time.perf_counter()
        publish(i)
        latencies.append(time.perf_counter() - started)
    cpu_used = time.process_time() - cpu
    requests = target.packets() - before - target.mntr_overhead
    return {
        "p50_us": statistics.median(latencies) * 1e6,
        "zk_requests_per_publish": requests / count,
        "cpu_us_per_publish": cpu_used / count * 1e6,
    }


def _new_key(task: Any, base: int, i: int) -> object:
    return task.delay(base + i)


def _same_key(task: Any, key: int, _i: int) -> object:
    return task.delay(key)


def main() -> None:
    parser = base_arguments("publish-side cost of .delay()", ("all",))
    parser.add_argument("--runs", type=int, default=3, help="rounds per implementation")
    parser.add_argument("--tiny", action="store_true", help="a few publishes: the smoke run")
    parser.add_argument("--no-peer", action="store_true", help="leave celery-singleton out")
    args = parser.parse_args()
    count = 20 if args.tiny else 300 if args.quick else 2000
    peer = not args.no_peer and importlib.util.find_spec(PEER) is not None
    impls = ["plain", "ours", *([PEER] if peer else [])]
    document: dict[str, Any] = {
        "benchmark": "celery_publish",
        "quick": args.quick,
        "tiny": args.tiny,
        "runs": args.runs,
        "publishes": count,
        "zk_recipes": zk_recipes.__version__,
        "machine": machine_meta(),
        "peer": peer,
    }
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    with (
        tempfile.TemporaryDirectory(prefix="zk-publish-bench-") as directory,
        RedisServer(Path(directory) / "redis") as redis_server,
        server_target(args.hosts) as target,
    ):
        target.calibrate(0.5)
        document["server"] = target.version()
        redis_url = f"{redis_server.url}/0"
        broker = redis.Redis.from_url(redis_url)
        app, tasks = _app(redis_url, target, peer)
        keys = itertools.count()
        for task in tasks.values():  # warm up: connections, the marker's parents
            task.delay(-1 - next(keys))
        broker.flushall()
        for round_, order in rotating_rounds(impls, args.runs):
            for impl in order:
                task = tasks[impl]
                base = (round_ + 1) * 10_000_000
                run = {"first": _measure(target, functools.partial(_new_key, task, base), count)}
                if impl != "plain":
                    task.delay(base - 1)  # queued: every publish below is its duplicate
                    run["duplicate"] = _measure(
                        target, functools.partial(_same_key, task, base - 1), count
                    )
                broker.flushall()
                runs[impl].append(run)
                progress(
                    f"{impl}: "
                    + ", ".join(f"{kind} {m['p50_us']:.0f} µs" for kind, m in run.items())
                )
        zk_recipes_celery.close_clients()
        app.close()
    results: dict[str, Any] = {}
    for impl, of in runs.items():
        results[impl] = {
            kind: {key: median([r[kind][key] for r in of]) for key in of[0][kind]} for kind in of[0]
        }
        results[impl]["runs"] = of
    plain = results["plain"]["first"]["p50_us"]
    for impl in impls[1:]:
        for kind in ("first", "duplicate"):
            results[impl][kind]["added_us_over_plain"] = results[impl][kind]["p50_us"] - plain
    if peer:
        results["ours_over_celery_singleton"] = {
            kind: ratio(results["ours"][kind]["p50_us"], results[PEER][kind]["p50_us"])
            for kind in ("first", "duplicate")
        }
    document["results"] = results
    emit(document, args.out)


if __name__ == "__main__":
    main()
