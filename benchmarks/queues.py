"""Queue benchmark: our DistributedQueue beside kazoo's Queue and LockingQueue, one run.

    python benchmarks/queues.py [--quick|--tiny] [--runs N] [--out FILE] [--hosts HOST:PORT]
                                [--sections plain,locked,multi]

Prints one JSON document on stdout (progress on stderr). Each implementation
runs on the same server, in rotating order, ``--runs`` times (3 by default).

- **plain**: one producer puts N items (16 bytes), then one consumer takes
  them all: ours without a lock path (at-most-once, as Curator's) against
  kazoo's ``Queue`` (``put`` / ``get``). Put and take throughput (items/s),
  server requests per item for each (``mntr``'s packets, less our pings and
  the ``mntr`` reads), and the process's CPU per item.
- **locked**: the same with lock-safe consumption: ours with a lock path
  against kazoo's ``LockingQueue`` (``put``, ``get`` + ``consume``).
- **multi**: ours only, ``put_multi`` of 10 items per node (batching, apart).
- **four**: 4 producers and 4 consumers at once (threads, a client each),
  plain and lock-safe: items/s from the first put to the last take, and
  server requests per item.

Never asserts timings: benchmarks measure, tests check counts.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import (
    Target,
    base_arguments,
    emit,
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
from zk_recipes import DistributedQueue, ItemContext, ZkClient

SECTIONS = ("plain", "locked", "multi", "four")
WORKERS = 4
IMPLS = ("ours", "kazoo")
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}
ITEM = b"0123456789abcdef"


def _cpu() -> float:
    return time.process_time()


def _repeat(action: Callable[[], object], times: int) -> Callable[[], None]:
    def work() -> None:
        for _ in range(times):
            action()

    return work


def _measure(target: Target, work: Callable[[], object], items: int) -> dict[str, float]:
    before, cpu, started = target.packets(), _cpu(), time.perf_counter()
    work()
    elapsed = time.perf_counter() - started
    requests = target.packets() - before - target.mntr_overhead
    return {
        "items_per_s": items / elapsed,
        "requests_per_item": requests / items,
        "cpu_us_per_item": (_cpu() - cpu) / items * 1e6,
    }


def _ours(target: Target, path: str, items: int, locked: bool) -> dict[str, Any]:
    client = ZkClient(target.hosts, session_timeout=30.0).start()
    producer = DistributedQueue(client, path).start()
    put = _measure(target, _repeat(lambda: producer.put(ITEM), items), items)
    producer.close()
    done = threading.Event()
    count = [0]

    def consume(value: bytes, context: ItemContext) -> None:
        count[0] += 1
        if count[0] == items:
            done.set()

    lock_path = path + "-locks" if locked else None
    consumer: DistributedQueue[bytes] = DistributedQueue(client, path, consume, lock_path=lock_path)

    def take() -> None:
        consumer.start()
        done.wait(600)

    taken = _measure(target, take, items)
    consumer.close()
    client.close()
    return {"put": put, "take": taken}


def _kazoo(target: Target, path: str, items: int, locked: bool) -> dict[str, Any]:
    kz = KazooClient(target.hosts, timeout=30.0)
    kz.start(timeout=30)
    queue: Any = kz.LockingQueue(path) if locked else kz.Queue(path)
    put = _measure(target, _repeat(lambda: queue.put(ITEM), items), items)

    def take() -> None:
        for _ in range(items):
            if locked:
                queue.get()
                queue.consume()
            else:
                queue.get()

    taken = _measure(target, take, items)
    kz.stop()
    kz.close()
    return {"put": put, "take": taken}


def section(target: Target, items: int, runs: int, locked: bool) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLS}
    for round_, order in rotating_rounds(IMPLS, runs):
        for impl in order:
            path = f"{target.root}/{'locked' if locked else 'plain'}-{impl}-{round_}"
            run = (_ours if impl == "ours" else _kazoo)(target, path, items, locked)
            results[impl].append(run)
            progress(
                f"{'locked' if locked else 'plain'} {impl}: put {run['put']['items_per_s']:.0f}/s "
                f"take {run['take']['items_per_s']:.0f}/s"
            )
    out: dict[str, Any] = {"items": items}
    for impl, runs_of in results.items():
        out[impl] = {
            phase: {
                key: median([r[phase][key] for r in runs_of])
                for key in ("items_per_s", "requests_per_item", "cpu_us_per_item")
            }
            for phase in ("put", "take")
        }
        out[impl]["runs"] = runs_of
    for phase in ("put", "take"):
        out[f"{phase}_ours_over_kazoo"] = {
            "throughput": ratio(
                out["ours"][phase]["items_per_s"], out["kazoo"][phase]["items_per_s"]
            ),
            "requests": ratio(
                out["kazoo"][phase]["requests_per_item"], out["ours"][phase]["requests_per_item"]
            ),
        }
    return out


def _four_ours(target: Target, path: str, items: int, locked: bool) -> None:
    clients = [ZkClient(target.hosts, session_timeout=30.0).start() for _ in range(2 * WORKERS)]
    done = threading.Event()
    lock = threading.Lock()
    count = [0]

    def consume(value: bytes, context: ItemContext) -> None:
        with lock:
            count[0] += 1
            if count[0] == items:
                done.set()

    lock_path = path + "-locks" if locked else None
    consumers = [
        DistributedQueue(c, path, consume, lock_path=lock_path).start() for c in clients[WORKERS:]
    ]
    producers = [DistributedQueue(c, path).start() for c in clients[:WORKERS]]
    threads = [
        threading.Thread(target=_repeat(functools.partial(p.put, ITEM), items // WORKERS))
        for p in producers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.wait(600)
    for queue in (*producers, *consumers):
        queue.close()
    for client in clients:
        client.close()


def _four_kazoo(target: Target, path: str, items: int, locked: bool) -> None:
    clients = []
    for _ in range(2 * WORKERS):
        kz = KazooClient(target.hosts, timeout=30.0)
        kz.start(timeout=30)
        clients.append(kz)
    lock = threading.Lock()
    count = [0]

    def produce(kz: Any) -> None:
        queue = kz.LockingQueue(path) if locked else kz.Queue(path)
        for _ in range(items // WORKERS):
            queue.put(ITEM)

    def consume(kz: Any) -> None:
        queue = kz.LockingQueue(path) if locked else kz.Queue(path)
        while True:
            with lock:
                if count[0] >= items:
                    return
            got = queue.get(0.2) if locked else queue.get()
            if got is None:
                if not locked:
                    time.sleep(0.005)
                continue
            if locked:
                queue.consume()
            with lock:
                count[0] += 1

    threads = [threading.Thread(target=produce, args=(kz,)) for kz in clients[:WORKERS]]
    threads += [threading.Thread(target=consume, args=(kz,)) for kz in clients[WORKERS:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    for kz in clients:
        kz.stop()
        kz.close()


def section_four(target: Target, items: int, runs: int) -> dict[str, Any]:
    items -= items % WORKERS  # each producer puts the same number
    out: dict[str, Any] = {"items": items, "producers": WORKERS, "consumers": WORKERS}
    for locked in (False, True):
        kind = "locked" if locked else "plain"
        results: dict[str, list[dict[str, float]]] = {impl: [] for impl in IMPLS}
        for round_, order in rotating_rounds(IMPLS, runs):
            for impl in order:
                path = f"{target.root}/four-{kind}-{impl}-{round_}"
                run = _four_ours if impl == "ours" else _four_kazoo
                measured = _measure(
                    target, functools.partial(run, target, path, items, locked), items
                )
                results[impl].append(measured)
                progress(f"4x4 {kind} {impl}: {measured['items_per_s']:.0f} items/s")
        summary: dict[str, Any] = {
            impl: {
                key: median([r[key] for r in values])
                for key in ("items_per_s", "requests_per_item", "cpu_us_per_item")
            }
            | {"runs": values}
            for impl, values in results.items()
        }
        summary["ours_over_kazoo"] = {
            "throughput": ratio(summary["ours"]["items_per_s"], summary["kazoo"]["items_per_s"]),
            "requests": ratio(
                summary["kazoo"]["requests_per_item"], summary["ours"]["requests_per_item"]
            ),
        }
        out[kind] = summary
    return out


def section_multi(target: Target, items: int, runs: int) -> dict[str, Any]:
    values = []
    for round_ in range(runs):
        client = ZkClient(target.hosts, session_timeout=30.0).start()
        queue = DistributedQueue(client, f"{target.root}/multi-{round_}").start()
        put_ten = functools.partial(queue.put_multi, [ITEM] * 10)
        measured = _measure(target, _repeat(put_ten, items // 10), items)
        queue.close()
        client.close()
        values.append(measured)
        progress(f"put_multi x10: {measured['items_per_s']:.0f} items/s")
    return {
        "items": items,
        "batch": 10,
        "items_per_s": median([v["items_per_s"] for v in values]),
        "requests_per_item": median([v["requests_per_item"] for v in values]),
        "runs": values,
    }


def main() -> None:
    parser = base_arguments("queue benchmark", SECTIONS)
    parser.add_argument("--runs", type=int, default=3, help="rounds per implementation")
    parser.add_argument("--tiny", action="store_true", help="a few items: the suite's smoke run")
    args = parser.parse_args()
    sections = parse_sections(args.sections, SECTIONS)
    items = 30 if args.tiny else 300 if args.quick else 2000
    document: dict[str, Any] = {
        "benchmark": "queues",
        "quick": args.quick,
        "tiny": args.tiny,
        "runs": args.runs,
        "zk_recipes": zk_recipes.__version__,
        "machine": machine_meta(),
    }
    with server_target(args.hosts, **SERVER_OPTIONS) as target:
        target.calibrate(0.5)
        document["server"] = target.version()
        admin = KazooClient(target.hosts, timeout=30.0)
        admin.start(timeout=30)
        try:
            if "plain" in sections:
                document["plain"] = section(target, items, args.runs, locked=False)
            if "locked" in sections:
                document["locked"] = section(target, items, args.runs, locked=True)
            if "multi" in sections:
                document["multi"] = section_multi(target, items, args.runs)
            if "four" in sections:
                document["four"] = section_four(target, items, args.runs)
        finally:
            target.remove_root(admin)
            admin.stop()
            admin.close()
    emit(document, args.out)


if __name__ == "__main__":
    main()
