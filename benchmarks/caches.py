"""Cache benchmark: our TreeCache (and NodeCache) beside kazoo's TreeCache (and DataWatch).

    python benchmarks/caches.py [--quick] [--runs N] [--out FILE] [--hosts HOST:PORT]
                                [--sections load,latency,reconnect]

Prints one JSON document on stdout (progress on stderr). Each implementation
runs on the same server, in rotating order, ``--runs`` times (3 by default).

- **load**: a tree of N nodes (100 per directory, 16 bytes of data each) is
  loaded by a cache in a child process of its own: seconds from ``start()``
  to INITIALIZED, the child's RSS growth per node (memory per cached node, the
  Python objects included) and its CPU time, and the server requests the
  load took (``mntr``'s packets, less the overhead of reading them).
- **latency**: a writer sets one leaf of a 1,000-node tree, again and again;
  update-to-event latency (the ``set`` call to the listener's event), p50
  and p99, and server requests per change beyond the write itself. Single
  node: our NodeCache against kazoo's DataWatch.
- **mix**: a tree of 10,101 nodes (200 leaves with ``--tiny``); a writer
  creates N new leaves, then sets each, then deletes each, every change
  waited for at the cache's listener; server requests per create, per data
  change and per delete beyond the write itself, and their mean (a third of
  each kind). kazoo's TreeCache reads and watches a new node and re-lists its
  parent on a create, reads on a change, and reads and re-lists on a delete;
  ours reads a new node once, a changed one once, and a deleted one not at
  all (its notification is final).
- **reconnect**: a loaded cache of N nodes is cut off (a proxy drops its
  traffic), 10 nodes change meanwhile, the proxy heals; server requests from
  then until the cache is equal to the server again (ours: RESYNCED; kazoo's:
  no signal, so until the server sees no more requests from it for a second).

Never asserts timings: benchmarks measure, tests check counts.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import (
    Target,
    base_arguments,
    emit,
    latency_summary,
    machine_meta,
    median,
    parse_sections,
    progress,
    quiet_packets,
    ratio,
    rotating_rounds,
    server_target,
)
from kazoo.client import KazooClient

import zk_recipes
from zk_recipes import CacheEventType, NodeCache, TreeCache, ZkClient

SECTIONS = ("load", "latency", "mix", "reconnect")
IMPLS = ("ours", "kazoo")
#: As in the locks benchmark: ZooKeeper's real standalone mode, no container reaping.
SERVER_OPTIONS: dict[str, Any] = {"standalone_mode": True, "container_check_interval": 60.0}
FANOUT = 100
DATA = b"0123456789abcdef"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _set_when(condition: Callable[[Any], bool], event: threading.Event) -> Callable[[Any], None]:
    """A listener that sets ``event`` on the first item ``condition`` accepts."""

    def listener(item: Any) -> None:
        if condition(item):
            event.set()

    return listener


def _stamp_when(kind: CacheEventType, stamp: _Stamp) -> Callable[[Any], None]:
    def listener(event: Any) -> None:
        if event.type is kind:
            stamp()

    return listener


class _Stamp:
    """Called when an event arrives: notes when, and wakes the writer."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.ns = 0

    def __call__(self, *_args: object) -> None:
        self.ns = time.monotonic_ns()
        self.arrived.set()


def build_tree(kz: Any, root: str, count: int) -> None:
    """``count`` leaves under ``root``, ``FANOUT`` per directory, created in pipelined batches."""
    kz.ensure_path(root)
    dirs = [f"{root}/d{i:04d}" for i in range((count + FANOUT - 1) // FANOUT)]
    for batch in range(0, len(dirs), 1000):
        for result in [kz.create_async(d) for d in dirs[batch : batch + 1000]]:
            result.get(timeout=60)
    leaves = [f"{dirs[i // FANOUT]}/n{i % FANOUT:03d}" for i in range(count)]
    for batch in range(0, len(leaves), 2000):
        for result in [kz.create_async(p, DATA) for p in leaves[batch : batch + 2000]]:
            result.get(timeout=60)


# -- the child process of the load section ---------------------------------------------------


def child_load(impl: str, hosts: str, root: str) -> dict[str, Any]:
    """Load ``root`` with ``impl``'s cache; what it cost this process."""
    if impl == "ours":
        client = ZkClient(hosts, session_timeout=30.0).start()
        before, cpu = _rss_bytes(), _cpu_s()
        started = time.monotonic()
        cache = TreeCache(client, root).start()
        cache.wait_initialized(600)
        took = time.monotonic() - started
        size = len(cache.current())
        after, cpu = _rss_bytes(), _cpu_s() - cpu
        cache.close()
        client.close()
    else:
        from kazoo.recipe.cache import TreeCache as KazooTreeCache, TreeEvent

        kz = KazooClient(hosts, timeout=30.0)
        kz.start(timeout=30)
        done = threading.Event()
        before, cpu = _rss_bytes(), _cpu_s()
        started = time.monotonic()
        tree = KazooTreeCache(kz, root)
        tree.listen(_set_when(lambda event: event.event_type == TreeEvent.INITIALIZED, done))
        tree.start()
        done.wait(600)
        took = time.monotonic() - started
        size = _kazoo_size(tree, root)
        after, cpu = _rss_bytes(), _cpu_s() - cpu
        tree.close()
        kz.stop()
        kz.close()
    return {"seconds": took, "nodes": size, "rss_bytes": after - before, "cpu_s": cpu}


def _kazoo_size(tree: Any, root: str) -> int:
    count, stack = 0, [root]
    while stack:
        path = stack.pop()
        if tree.get_data(path) is None:
            continue
        count += 1
        stack.extend(f"{path}/{name}" for name in tree.get_children(path) or ())
    return count


def run_child(impl: str, hosts: str, root: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child-load", impl, "--hosts", hosts, "--root", root]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{impl} load failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- sections ---------------------------------------------------------------------------------


def section_load(target: Target, admin: Any, sizes: list[int], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in sizes:
        root = f"{target.root}/load{size}"
        progress(f"load: building {size} nodes")
        build_tree(admin, root, size)
        samples: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLS}
        for round_, order in rotating_rounds(IMPLS, runs):
            for impl in order:
                before = target.packets()
                result = run_child(impl, target.hosts, root)
                result["requests"] = target.packets() - before - target.mntr_overhead
                samples[impl].append(result)
                progress(f"load {size}: round {round_} {impl}: {result['seconds']:.2f} s")
        summary: dict[str, Any] = {}
        for impl in IMPLS:
            runs_of = samples[impl]
            nodes = runs_of[0]["nodes"]
            summary[impl] = {
                "nodes": nodes,
                "load_s_median": median([r["seconds"] for r in runs_of]),
                "rss_bytes_per_node_median": median([r["rss_bytes"] / nodes for r in runs_of]),
                "cpu_s_median": median([r["cpu_s"] for r in runs_of]),
                "requests_median": median([r["requests"] for r in runs_of]),
                "runs": runs_of,
            }
        summary["kazoo_over_ours"] = {
            "load_time": ratio(summary["kazoo"]["load_s_median"], summary["ours"]["load_s_median"]),
            "rss_per_node": ratio(
                summary["kazoo"]["rss_bytes_per_node_median"],
                summary["ours"]["rss_bytes_per_node_median"],
            ),
            "requests": ratio(
                summary["kazoo"]["requests_median"], summary["ours"]["requests_median"]
            ),
        }
        out[str(size)] = summary
    return out


def _timed_changes(admin: Any, path: str, count: int, stamp: _Stamp) -> list[int]:
    samples = []
    for index in range(count):
        stamp.arrived.clear()
        sent = time.monotonic_ns()
        admin.set(path, str(index).encode())
        if not stamp.arrived.wait(10):
            raise RuntimeError(f"no event for change {index} of {path}")
        samples.append(stamp.ns - sent)
    return samples


class _KazooTreeListener:
    """kazoo's TreeCache listener: INITIALIZED sets ``ready``; later updates stamp."""

    def __init__(self, stamp: _Stamp) -> None:
        self.stamp = stamp
        self.ready = threading.Event()

    def __call__(self, event: Any) -> None:
        from kazoo.recipe.cache import TreeEvent

        if event.event_type == TreeEvent.INITIALIZED:
            self.ready.set()
        elif event.event_type == TreeEvent.NODE_UPDATED and self.ready.is_set():
            self.stamp()


class _DataWatchListener:
    """kazoo's DataWatch calls once at once, then per change: stamp the changes."""

    def __init__(self, stamp: _Stamp) -> None:
        self.stamp = stamp
        self.first = True

    def __call__(self, data: Any, stat: Any) -> None:
        if self.first:
            self.first = False
        else:
            self.stamp()


def _watching(impl: str, hosts: str, root: str, leaf: str, stamp: _Stamp) -> Callable[[], None]:
    """Start ``impl`` watching (loaded); returns what closes it and its client."""
    if impl.endswith("ours"):
        client = ZkClient(hosts, session_timeout=30.0).start()
        cache: Any = TreeCache(client, root) if impl == "tree_ours" else NodeCache(client, leaf)
        cache.listen(_stamp_when(CacheEventType.CHANGED, stamp))
        cache.start()
        cache.wait_initialized(120)

        def close_ours() -> None:
            cache.close()
            client.close()

        return close_ours
    from kazoo.recipe.cache import TreeCache as KazooTreeCache

    kz = KazooClient(hosts, timeout=30.0)
    kz.start(timeout=30)
    tree: Any = None
    if impl == "tree_kazoo":
        listener = _KazooTreeListener(stamp)
        tree = KazooTreeCache(kz, root)
        tree.listen(listener)
        tree.start()
        listener.ready.wait(120)
    else:
        kz.DataWatch(leaf, _DataWatchListener(stamp))

    def close_kazoo() -> None:
        if tree is not None:
            tree.close()
        kz.stop()
        kz.close()

    return close_kazoo


def section_latency(target: Target, admin: Any, changes: int, runs: int) -> dict[str, Any]:
    root = f"{target.root}/latency"
    build_tree(admin, root, 1000)
    leaf = f"{root}/d0005/n050"
    results: dict[str, dict[str, list[Any]]] = {}
    impls = ("tree_ours", "tree_kazoo", "node_ours", "node_kazoo")
    for _round, order in rotating_rounds(impls, runs):
        for impl in order:
            stamp = _Stamp()
            close = _watching(impl, target.hosts, root, leaf, stamp)
            time.sleep(0.2)
            before = target.packets()
            cpu = _cpu_s()
            samples = _timed_changes(admin, leaf, changes, stamp)
            cpu = _cpu_s() - cpu
            requests = target.packets() - before - target.mntr_overhead - changes
            close()
            entry = results.setdefault(impl, {"samples": [], "requests": [], "cpu": []})
            entry["samples"].extend(samples)
            entry["requests"].append(requests / changes)
            entry["cpu"].append(cpu / changes)
            progress(f"latency {impl}: p50 {median(samples) / 1e6:.2f} ms")
    out: dict[str, Any] = {}
    for impl, entry in results.items():
        out[impl] = {
            "latency": latency_summary(entry["samples"]),
            "requests_per_change_median": median(entry["requests"]),
            "process_cpu_s_per_change_median": median(entry["cpu"]),
        }
    return out


class _Seen:
    """A listener for the mix: wakes the writer when ``path`` had the ``kind`` of event awaited."""

    def __init__(self) -> None:
        self.path = ""
        self.kind = "create"
        self.arrived = threading.Event()

    def ours(self, event: Any) -> None:
        kind = {
            "create": CacheEventType.CREATED,
            "change": CacheEventType.CHANGED,
            "delete": CacheEventType.DELETED,
        }[self.kind]
        if event.type is kind and event.path == self.path:
            self.arrived.set()

    def kazoo(self, event: Any) -> None:
        from kazoo.recipe.cache import TreeEvent

        kind = {
            "create": TreeEvent.NODE_ADDED,
            "change": TreeEvent.NODE_UPDATED,
            "delete": TreeEvent.NODE_REMOVED,
        }[self.kind]
        data = event.event_data
        if event.event_type == kind and data is not None and data.path == self.path:
            self.arrived.set()


MIX_KINDS = ("create", "change", "delete")


def _mix_phase(target: Target, admin: Any, seen: _Seen, kind: str, paths: list[str]) -> float:
    """One kind of change to every path, each waited for; requests per change beyond the write."""
    before = target.packets()
    for index, path in enumerate(paths):
        seen.path, seen.kind = path, kind
        seen.arrived.clear()
        if kind == "create":
            admin.create(path, DATA)
        elif kind == "change":
            admin.set(path, str(index).encode())
        else:
            admin.delete(path)
        if not seen.arrived.wait(10):
            raise RuntimeError(f"no event for the {kind} of {path}")
    time.sleep(0.5)  # the last event's follow-up reads
    return (target.packets() - before - target.mntr_overhead - len(paths)) / len(paths)


def section_mix(target: Target, admin: Any, size: int, count: int, runs: int) -> dict[str, Any]:
    """Leaf creates, data changes and leaf deletes in a loaded tree: requests per change of each."""
    from kazoo.recipe.cache import TreeCache as KazooTreeCache, TreeEvent

    root = f"{target.root}/mix"
    build_tree(admin, root, size)
    results: dict[str, dict[str, list[float]]] = {}
    for round_, order in rotating_rounds(IMPLS, runs):
        for impl in order:
            seen = _Seen()
            if impl == "ours":
                client = ZkClient(target.hosts, session_timeout=30.0).start()
                cache: Any = TreeCache(client, root)
                cache.listen(seen.ours)
                cache.start()
                cache.wait_initialized(300)
            else:
                kz = KazooClient(target.hosts, timeout=30.0)
                kz.start(timeout=30)
                ready = threading.Event()
                cache = KazooTreeCache(kz, root)
                cache.listen(
                    _set_when(lambda event: event.event_type == TreeEvent.INITIALIZED, ready)
                )
                cache.listen(seen.kazoo)
                cache.start()
                ready.wait(300)
            time.sleep(0.2)
            dirs = max(1, size // FANOUT)
            paths = [f"{root}/d{i % dirs:04d}/mix{round_}-{impl}-{i}" for i in range(count)]
            per = results.setdefault(impl, {kind: [] for kind in MIX_KINDS})
            for kind in MIX_KINDS:
                per[kind].append(_mix_phase(target, admin, seen, kind, paths))
            cache.close()
            if impl == "ours":
                client.close()
            else:
                kz.stop()
                kz.close()
            shown = ", ".join(f"{kind} {per[kind][-1]:.2f}" for kind in MIX_KINDS)
            progress(f"mix {impl}: requests per {shown}")
    out: dict[str, Any] = {"nodes": size + size // FANOUT + 1, "changes_per_kind": count}
    for impl, per in results.items():
        medians = {f"requests_per_{kind}_median": median(per[kind]) for kind in MIX_KINDS}
        out[impl] = {
            **medians,
            # A third of each kind: the mean of the three.
            "requests_per_mixed_change": sum(medians.values()) / len(MIX_KINDS),
            "runs": per,
        }
    out["kazoo_over_ours"] = ratio(
        out["kazoo"]["requests_per_mixed_change"], out["ours"]["requests_per_mixed_change"]
    )
    return out


def section_reconnect(target: Target, admin: Any, size: int, runs: int) -> dict[str, Any]:
    from kazoo.recipe.cache import TreeCache as KazooTreeCache, TreeEvent

    from zk_recipes.testing import TcpProxy

    host, port = target.address
    root = f"{target.root}/reconnect"
    build_tree(admin, root, size)
    results: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    for _round, order in rotating_rounds(IMPLS, runs):
        for impl in order:
            with TcpProxy(host, port) as proxy:
                resynced = threading.Event()
                if impl == "ours":
                    client = ZkClient(proxy.connect_string, session_timeout=30.0).start()
                    cache: Any = TreeCache(client, root)
                    cache.listen(
                        _set_when(lambda event: event.type is CacheEventType.RESYNCED, resynced)
                    )
                    cache.start()
                    cache.wait_initialized(600)
                else:
                    kz = KazooClient(proxy.connect_string, timeout=30.0)
                    kz.start(timeout=30)
                    ready = threading.Event()
                    cache = KazooTreeCache(kz, root)
                    cache.listen(
                        _set_when(lambda event: event.event_type == TreeEvent.INITIALIZED, ready)
                    )
                    cache.start()
                    ready.wait(600)
                time.sleep(0.5)
                proxy.cut()
                time.sleep(0.5)
                for index in range(0, size, size // 10):  # 10 leaves, spread out
                    admin.set(f"{root}/d{index // FANOUT:04d}/n{index % FANOUT:03d}", b"changed")
                before = target.packets()
                proxy.heal()
                if impl == "ours":
                    resynced.wait(120)
                    requests = target.packets() - before - target.mntr_overhead
                    cache.close()
                    client.close()
                else:
                    requests = quiet_packets(target)
                    cache.close()
                    kz.stop()
                    kz.close()
                results[impl].append(requests)
                progress(f"reconnect {impl}: {requests} requests")
    out: dict[str, Any] = {
        impl: {"requests_median": median(values), "runs": values}
        for impl, values in results.items()
    }
    out["nodes"] = size + (size + FANOUT - 1) // FANOUT + 1
    out["kazoo_over_ours"] = ratio(out["kazoo"]["requests_median"], out["ours"]["requests_median"])
    return out


def main() -> None:
    if "--child-load" in sys.argv:
        index = sys.argv.index("--child-load")
        impl = sys.argv[index + 1]
        hosts = sys.argv[sys.argv.index("--hosts") + 1]
        root = sys.argv[sys.argv.index("--root") + 1]
        print(json.dumps(child_load(impl, hosts, root)))
        return
    parser = base_arguments("cache benchmark", SECTIONS)
    parser.add_argument("--runs", type=int, default=3, help="rounds per implementation")
    parser.add_argument(
        "--tiny", action="store_true", help="a few hundred nodes: the suite's smoke run"
    )
    args = parser.parse_args()
    sections = parse_sections(args.sections, SECTIONS)
    sizes = [200] if args.tiny else [1000, 10_000] if args.quick else [10_000, 100_000]
    changes = 20 if args.tiny else 100 if args.quick else 500
    reconnect_size = 300 if args.tiny else 2000 if args.quick else 10_000
    mix_size = 200 if args.tiny else 10_000
    document: dict[str, Any] = {
        "benchmark": "caches",
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
            if "load" in sections:
                document["load"] = section_load(target, admin, sizes, args.runs)
            if "latency" in sections:
                document["latency"] = section_latency(target, admin, changes, args.runs)
            if "mix" in sections:
                document["mix"] = section_mix(
                    target, admin, mix_size, changes // 5 if args.tiny else changes // 2, args.runs
                )
            if "reconnect" in sections:
                document["reconnect"] = section_reconnect(target, admin, reconnect_size, args.runs)
        finally:
            target.remove_root(admin)
            admin.stop()
            admin.close()
    emit(document, args.out)


if __name__ == "__main__":
    main()
