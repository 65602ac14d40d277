"""Cost as work grows: locks, TreeCache, queues and sessions from small to large, beside kazoo.

    python benchmarks/scale.py [--quick] [--out FILE] [--hosts HOST:PORT]
        [--sections handoff_threads,handoff_processes,tree,queue,sessions]

Prints one JSON document on stdout (progress on stderr); one throwaway server
serves every section. ``benchmarks/plot_scale.py`` draws it. Sections (the
README's "scale.py" says what each figure means):

- **handoff_threads**, **handoff_processes**: lock hand-off with 1, 10, 100 and
  1,000 waiters as threads of one process, and with 1, 10 and 100 as processes
  (1,000 processes do not fit this machine: the JSON says why): hand-off
  latency, server requests per hand-off, watch notifications per release;
  kazoo's ``Lock`` and ours (_scale_handoff.py).
- **tree**: TreeCache at 1k, 10k, 100k and 1M nodes: load time, the RSS the
  load added (each cache in a fresh process), the requests of a resync after a
  reconnect; kazoo's TreeCache up to 100k (_scale_tree.py).
- **queue**: 4 producers, 1, 4 and 16 consumers: items/s and requests per item,
  our DistributedQueue plain and lock-safe, kazoo's Queue and LockingQueue
  (_scale_queue.py).
- **sessions**: 1, 100 and 1,000 idle clients in one process: threads, RSS and
  pings per second on the server, our ZkClient and KazooClient (_scale_sessions.py).

``--quick`` stops each family one step earlier (the tree at 10k). Never
asserts timings: benchmarks measure, tests check counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import logging
import os
import resource
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import _scale_handoff
import _scale_queue
import _scale_sessions
import _scale_tree
from _common import (
    Target,
    base_arguments,
    count_pings,
    emit,
    load_average,
    machine_meta,
    parse_sections,
    progress,
)
from kazoo.client import KazooClient

import zk_recipes

SECTIONS = ("handoff_threads", "handoff_processes", "tree", "queue", "sessions")
#: The tree goes last: a million nodes make the server's heap and GC pauses larger.
RUN_ORDER = ("handoff_threads", "handoff_processes", "queue", "sessions", "tree")
#: Real standalone mode and no container reaping (as locks.py), and no limit on
#: connections from one address: 101 processes and 1,000 sessions come from 127.0.0.1.
SERVER_CONFIG = {"maxClientCnxns": "0"}
#: The server's heap for a million nodes, when the machine has the memory.
BIG_HEAP_MB = 1536


@dataclasses.dataclass(frozen=True)
class Settings:
    thread_waiters: tuple[int, ...]
    process_waiters: tuple[int, ...]
    handoff_steps: int
    settle_s: float
    tree_sizes: tuple[int, ...]
    kazoo_tree_max: int
    queue_consumers: tuple[int, ...]
    queue_items: int
    queue_producers: int
    session_counts: tuple[int, ...]
    session_window_s: float

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:
            return cls(
                (1, 10, 100),
                (1, 10),
                8,
                0.05,
                (1000, 10_000),
                10_000,
                (1, 4, 16),
                200,
                4,
                (1, 100),
                5.0,
            )
        return cls(
            (1, 10, 100, 1000),
            (1, 10, 100),
            25,
            0.05,
            (1000, 10_000, 100_000, 1_000_000),
            100_000,
            (1, 4, 16),
            2000,
            4,
            (1, 100, 1000),
            15.0,
        )


def _mem_available_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


@contextlib.contextmanager
def serve(hosts: str | None, heap_mb: int | None) -> Iterator[tuple[Target, Any]]:
    """``--hosts``: that server. Otherwise a throwaway one (and the object, for its pid)."""
    if hosts:
        if "," in hosts or "/" in hosts:
            raise SystemExit("--hosts takes exactly one server HOST:PORT without a chroot")
        yield Target(hosts=hosts, owned=False), None
        return
    from zk_recipes.testing import DEFAULT_JVM_OPTIONS, ZooKeeperServer

    jvm = DEFAULT_JVM_OPTIONS
    if heap_mb is not None:
        jvm = (*(o for o in jvm if not o.startswith("-Xmx")), f"-Xmx{heap_mb}m")
    options: dict[str, Any] = {
        "standalone_mode": True,
        "container_check_interval": 60.0,
        "extra_config": SERVER_CONFIG,
        "jvm_options": jvm,
    }
    with ZooKeeperServer(**options) as server:
        yield Target(hosts=server.connect_string, owned=True, options=options), server


def _not_run_processes(s: Settings, result: dict[str, Any]) -> dict[str, Any]:
    rss_mb = result.get("worker_rss_mb_median") or 0.0
    spawned, spawn_s = int(result["workers_spawned"]), float(result["spawn_s"])
    total_mb = _mem_total_mb()
    return {
        "waiters": 1000,
        "reason": (
            f"1,001 Python processes on {_cpus()} cores: each worker held {rss_mb:.0f} MB "
            f"(median, connected), so 1,001 need about {rss_mb * 1001 / 1024:.0f} GB of the "
            f"machine's {total_mb / 1024:.0f} GB; starting {spawned} took {spawn_s:g} s "
            f"(1,001: about {spawn_s * 1001 / max(1, spawned):.0f} s) on a machine another "
            "test run shares. The 1,000-waiter step runs as threads (handoff_threads)."
        ),
    }


def _mem_total_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        return int(meminfo.readline().split()[1]) // 1024


def _cpus() -> int:
    return os.cpu_count() or 0


def notes(s: Settings, target: Target) -> list[str]:
    return [
        "Noisy machine: a shared 2-core box where another test suite may run at the same "
        "time (load averages in meta). Read shapes (flat, linear, the knee) and ratios "
        "from one run; absolute times move between runs.",
        "Requests are the server's zk_packets_received over a window, less the packet each "
        "mntr read adds and the pings (and session-proving syncs) our clients sent, counted "
        f"client-side; foreign traffic {target.foreign_rate:.2f} packets/s.",
        f"handoff: {s.handoff_steps} measured hand-offs per (waiters, lock), each after the "
        f"queue refilled to L waiters with every watch set; a {s.settle_s:g} s settle after "
        "the next acquire returned ends each step's window.",
        "tree: each cache loads in a fresh child process (RSS added = after INITIALIZED minus "
        "before start, the client already connected); one load per size and cache.",
        f"queue: {s.queue_producers} producer threads put {s.queue_items} items in all; one "
        "run per (consumers, queue).",
        f"sessions: idle clients, session timeout {_scale_sessions.SESSION_TIMEOUT_S:g} s; "
        f"pings/s over {s.session_window_s:g} s.",
        "The throwaway server runs ZooKeeper's real standalone mode with maxClientCnxns=0 "
        "(101 processes and 1,000 sessions connect from 127.0.0.1) and container checks "
        "every 60 s."
        if target.owned
        else f"External server {target.hosts}: its maxClientCnxns must allow 1,001 "
        "connections from this address, and its heap a million nodes.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_arguments(__doc__.splitlines()[0] if __doc__ else "scale", SECTIONS)
    args = parser.parse_args(argv)
    sections = parse_sections(args.sections, SECTIONS)
    s = Settings.make(args.quick)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    started, began = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    machine = machine_meta()
    available = _mem_available_mb()
    big = "tree" in sections and max(s.tree_sizes) >= 1_000_000 and available >= 6 * 1024
    heap_mb = BIG_HEAP_MB if big else None
    doc: dict[str, Any] = {"meta": {}, **{name: None for name in SECTIONS}, "notes": []}
    failed: list[str] = []
    with serve(args.hosts, heap_mb) as (target, server):
        progress(f"server {target.hosts} (heap {heap_mb or 'default'} MB)")
        target.calibrate(1.0)
        admin = KazooClient(target.hosts, timeout=30.0)
        admin.start(timeout=30)
        admin_pings = count_pings(admin)
        version = target.version()
        admin.ensure_path(target.root)
        try:
            for section in (name for name in RUN_ORDER if name in sections):
                try:
                    if section == "handoff_threads":
                        doc[section] = _scale_handoff.run_threads(
                            target,
                            s.thread_waiters,
                            s.handoff_steps,
                            s.settle_s,
                            lambda: admin_pings.value,
                        )
                    elif section == "handoff_processes":
                        result = _scale_handoff.run_processes(
                            target,
                            s.process_waiters,
                            s.handoff_steps,
                            s.settle_s,
                            lambda: admin_pings.value,
                        )
                        result["not_run"] = [_not_run_processes(s, result)]
                        doc[section] = result
                    elif section == "queue":
                        doc[section] = _scale_queue.run(
                            target, s.queue_consumers, s.queue_items, s.queue_producers
                        )
                    elif section == "sessions":
                        doc[section] = _scale_sessions.run(
                            target, list(s.session_counts), s.session_window_s
                        )
                    else:
                        doc[section] = _scale_tree.run(
                            target, admin, server, s.tree_sizes, s.kazoo_tree_max, heap_mb
                        )
                        if not big and not args.quick:
                            doc[section]["not_run"].append(
                                {
                                    "nodes": 1_000_000,
                                    "who": "both",
                                    "reason": f"{available} MB of memory available: too little "
                                    "for a server heap of 1.5 GB and a cache of a million nodes",
                                }
                            )
                except Exception as exc:
                    traceback.print_exc()
                    failed.append(f"section {section} failed: {exc!r}")
        finally:
            # Our own server is thrown away with the trees (a million deletes take minutes).
            if not target.owned:
                for size in s.tree_sizes if "tree" in sections else ():
                    with contextlib.suppress(Exception):
                        _scale_tree.delete_tree(admin, f"{target.root}/tree{size}", size)
                target.remove_root(admin)
            admin.stop()
            admin.close()
        doc["meta"] = {
            "benchmark": "scale",
            "started_at": started.isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - began, 1),
            "quick": args.quick,
            "sections": sections,
            "machine": {
                **machine,
                "load_avg_end": load_average(),
                "mem_available_mb_at_start": available,
                "open_files_limit": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
            },
            "python": sys.version.split()[0],
            "kazoo_version": importlib.metadata.version("kazoo"),
            "zk_recipes_version": zk_recipes.__version__,
            "zookeeper_version": version,
            "server": {
                "hosts": target.hosts,
                "own_throwaway_server": target.owned,
                "jvm_heap_max_mb": (heap_mb or 512) if target.owned else None,
                "config": SERVER_CONFIG if target.owned else None,
                "mntr_overhead_packets": target.mntr_overhead,
                "foreign_packets_per_s": round(target.foreign_rate, 3),
            },
            "settings": dataclasses.asdict(s),
        }
        doc["notes"] = notes(s, target) + failed
    emit(doc, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
