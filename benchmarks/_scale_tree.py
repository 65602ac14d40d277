"""TreeCache as the tree grows: load time, client memory, and the requests of a resync.

For each size, a tree of N leaves (100 per directory, 16 bytes each) is made
with pipelined ``multi`` transactions (a directory and its 100 leaves each).
Each cache then runs in a fresh child process (``python _scale_tree.py child
IMPL HOSTS ROOT``), so its RSS starts clean: seconds from ``start()`` to
INITIALIZED, the RSS that load added, its CPU. The child talks to the server
through a ``TcpProxy`` of ours; once loaded, the proxy cuts every connection,
10 leaves change, the proxy heals, and the server's packets from then until
the cache is equal again are the resync's requests (ours: until RESYNCED;
kazoo's has no such signal: from its client's CONNECTED until the server sees
no more from it for 5 s).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from _common import Target, progress, quiet_packets, ratio

FANOUT = 100
DATA = b"0123456789abcdef"
#: Transactions in flight while a tree is made or removed.
WINDOW = 64


def leaf(root: str, index: int) -> str:
    return f"{root}/d{index // FANOUT:05d}/n{index % FANOUT:03d}"


def _drain(pending: list[Any]) -> None:
    for result in pending:
        failed = [r for r in result.get(timeout=120) if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"a transaction failed: {failed[0]!r}")
    pending.clear()


def build_tree(kz: Any, root: str, count: int) -> float:
    """``count`` leaves under ``root``: one multi per directory, ``WINDOW`` in flight."""
    began = time.monotonic()
    kz.ensure_path(root)
    pending: list[Any] = []
    for first in range(0, count, FANOUT):
        directory = leaf(root, first).rpartition("/")[0]
        transaction = kz.transaction()
        transaction.create(directory)
        for index in range(first, min(count, first + FANOUT)):
            transaction.create(leaf(root, index), DATA)
        pending.append(transaction.commit_async())
        if len(pending) >= WINDOW:
            _drain(pending)
    _drain(pending)
    return time.monotonic() - began


def delete_tree(kz: Any, root: str, count: int) -> None:
    """The reverse of ``build_tree`` (a server not our own is left as it was found)."""
    pending: list[Any] = []
    for first in range(0, count, FANOUT):
        transaction = kz.transaction()
        for index in range(first, min(count, first + FANOUT)):
            transaction.delete(leaf(root, index))
        transaction.delete(leaf(root, first).rpartition("/")[0])
        pending.append(transaction.commit_async())
        if len(pending) >= WINDOW:
            _drain(pending)
    _drain(pending)
    kz.delete(root)


# -- the child: one cache in a process of its own -----------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def child(impl: str, hosts: str, root: str) -> None:
    """Load ``root`` with ``impl``'s cache; report; wait for the resync; close on command."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    resynced = threading.Event()
    initialized = threading.Event()
    reconnected = threading.Event()
    if impl == "ours":
        from zk_recipes import CacheEventType, TreeCache, ZkClient

        client = ZkClient(hosts, session_timeout=30.0).start()
        gc.collect()
        before, cpu, started = _rss(), _cpu_s(), time.monotonic()
        cache: Any = TreeCache(client, root)

        def on_event(event: Any) -> None:
            if event.type is CacheEventType.RESYNCED:
                resynced.set()

        cache.listen(on_event)
        cache.start()
        cache.wait_initialized(3600)
        took = time.monotonic() - started
        after, cpu = _rss(), _cpu_s() - cpu
        nodes = cache.size()
    else:
        from kazoo.client import KazooClient
        from kazoo.recipe.cache import TreeCache as KazooTreeCache, TreeEvent

        kz = KazooClient(hosts, timeout=30.0)
        kz.start(timeout=30)
        kz.add_listener(lambda state: reconnected.set() if state == "CONNECTED" else None)
        gc.collect()
        before, cpu, started = _rss(), _cpu_s(), time.monotonic()
        cache = KazooTreeCache(kz, root)

        def on_tree_event(event: Any) -> None:
            if event.event_type == TreeEvent.INITIALIZED:
                initialized.set()

        cache.listen(on_tree_event)
        cache.start()
        initialized.wait(3600)
        took = time.monotonic() - started
        after, cpu = _rss(), _cpu_s() - cpu
        nodes = _kazoo_size(cache, root)
    _say(
        event="loaded",
        seconds=took,
        nodes=nodes,
        rss_added_bytes=after - before,
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        cpu_s=cpu,
    )
    sys.stdin.readline()  # "resync": the proxy has healed
    if impl == "ours":
        began = time.monotonic()
        _say(event="resynced", ok=resynced.wait(600), seconds=time.monotonic() - began)
    else:  # kazoo's cache says nothing: its client's state tells when the re-reading starts
        began = time.monotonic()
        _say(event="reconnected", ok=reconnected.wait(600), seconds=time.monotonic() - began)
    sys.stdin.readline()  # "close"
    cache.close()
    if impl == "ours":
        client.close()
    else:
        kz.stop()
        kz.close()
    _say(event="closed")


def _kazoo_size(tree: Any, root: str) -> int:
    count, stack = 0, [root]
    while stack:
        path = stack.pop()
        if tree.get_data(path) is None:
            continue
        count += 1
        stack.extend(f"{path}/{name}" for name in tree.get_children(path) or ())
    return count


# -- the parent ---------------------------------------------------------------------------------


class _Child:
    """A child process and its stdout lines, read by a thread so waits can time out."""

    def __init__(self, impl: str, hosts: str, root: str) -> None:
        command = [sys.executable, __file__, "child", impl, hosts, root]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put(line)
        self.lines.put("")

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        if not line:
            raise RuntimeError(f"the {event!r} child ended (exit {self.proc.wait()})")
        message: dict[str, Any] = json.loads(line)
        if message.get("event") != event:
            raise RuntimeError(f"expected {event!r} from the child, got {message}")
        return message

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def cache_trial(target: Target, admin: Any, impl: str, root: str, size: int) -> dict[str, Any]:
    from zk_recipes.testing import TcpProxy

    with TcpProxy(*target.address) as proxy:
        child_process = _Child(impl, proxy.connect_string, root)
        try:
            before = target.packets()
            loaded = child_process.expect("loaded", 3600)
            loaded["load_requests"] = target.packets() - before - target.mntr_overhead
            time.sleep(0.5)
            proxy.cut()
            time.sleep(0.5)
            for index in range(0, size, max(1, size // 10)):  # 10 leaves, spread out
                admin.set(leaf(root, index), b"changed")
            before = target.packets()
            proxy.heal()
            child_process.tell("resync")
            if impl == "ours":
                resynced = child_process.expect("resynced", 900)
                requests = target.packets() - before - target.mntr_overhead
                loaded["resync_s"] = round(resynced["seconds"], 3)
                loaded["resynced"] = resynced["ok"]
            else:
                child_process.expect("reconnected", 660)
                requests = target.packets() - before - target.mntr_overhead
                # Its client collects the garbage of a big tree for a second or more at a time,
                # sending nothing meanwhile: a pause of 5 s ends the count, not of 1 s.
                requests += quiet_packets(target, quiet_s=5.0, limit_s=900.0)
            loaded["resync_requests"] = requests
            child_process.tell("close")
            child_process.expect("closed", 300)
        finally:
            child_process.end()
    del loaded["event"]
    loaded["rss_added_bytes_per_node"] = round(loaded["rss_added_bytes"] / loaded["nodes"], 1)
    return loaded


def _server_memory(server: Any) -> dict[str, Any]:
    """The server JVM's resident memory, and its live heap after a full GC (via jcmd)."""
    if server is None or server.pid is None:
        return {}
    out: dict[str, Any] = {}
    with open(f"/proc/{server.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                out["jvm_rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    jcmd = os.path.join(os.path.dirname(os.path.realpath(f"/proc/{server.pid}/exe")), "jcmd")
    try:
        subprocess.run([jcmd, str(server.pid), "GC.run"], capture_output=True, timeout=120)
        info = subprocess.run(
            [jcmd, str(server.pid), "GC.heap_info"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        out["heap_after_full_gc"] = f"not read: {exc!r}"
        return out
    out["heap_after_full_gc"] = " ".join(
        line.strip() for line in info.splitlines() if "total" in line and "used" in line
    )
    return out


def run(
    target: Target,
    admin: Any,
    server: Any,
    sizes: Sequence[int],
    kazoo_max: int,
    heap_mb: int | None,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    not_run: list[dict[str, Any]] = []
    for size in sizes:
        root = f"{target.root}/tree{size}"
        progress(f"tree: making {size:,} leaves")
        try:
            build_s = build_tree(admin, root, size)
        except Exception as exc:
            not_run.append({"nodes": size, "who": "both", "reason": f"making the tree: {exc!r}"})
            break
        mntr = target.mntr()
        entry: dict[str, Any] = {
            "leaves": size,
            "build": {
                "seconds": round(build_s, 2),
                "nodes_per_s": round(size / build_s),
                "server_znode_count": int(mntr["zk_znode_count"]),
                "server_approximate_data_size": int(mntr["zk_approximate_data_size"]),
            },
        }
        for impl in ("ours", "kazoo"):
            if impl == "kazoo" and size > kazoo_max:
                reason = _kazoo_reason(results, size)
                entry[impl] = {"skipped": reason}
                not_run.append({"nodes": size, "who": "kazoo", "reason": reason})
                continue
            progress(f"tree: {size:,} leaves, {impl}")
            try:
                entry[impl] = cache_trial(target, admin, impl, root, size)
            except Exception as exc:
                entry[impl] = {"failed": repr(exc)}
                not_run.append({"nodes": size, "who": impl, "reason": repr(exc)})
            else:
                progress(
                    f"tree: {size:,} {impl}: {entry[impl]['seconds']:.1f} s, "
                    f"{entry[impl]['rss_added_bytes'] / 2**20:.0f} MB, "
                    f"resync {entry[impl]['resync_requests']} requests"
                )
        if "seconds" in entry.get("kazoo", {}) and "seconds" in entry["ours"]:
            entry["kazoo_over_ours"] = {
                "load_time": ratio(entry["kazoo"]["seconds"], entry["ours"]["seconds"]),
                "rss": ratio(entry["kazoo"]["rss_added_bytes"], entry["ours"]["rss_added_bytes"]),
                "resync_requests": ratio(
                    entry["kazoo"]["resync_requests"], entry["ours"]["resync_requests"]
                ),
            }
        results[str(size)] = entry
    loaded = [int(s) for s, e in results.items() if "seconds" in e.get("ours", {})]
    loaded_kazoo = [int(s) for s, e in results.items() if "seconds" in e.get("kazoo", {})]
    return {
        "sizes": results,
        "fanout": FANOUT,
        "data_bytes": len(DATA),
        "largest_ours": max(loaded, default=0),
        "largest_kazoo": max(loaded_kazoo, default=0),
        "server_heap_max_mb": heap_mb,
        "server_memory_at_end": _server_memory(server),
        "not_run": not_run,
    }


def _kazoo_reason(results: dict[str, Any], size: int) -> str:
    measured = [(int(s), e["kazoo"]) for s, e in results.items() if "seconds" in e.get("kazoo", {})]
    if not measured:
        return "not run: kazoo's TreeCache was not measured at a smaller size in this run"
    largest, run = max(measured, key=lambda item: item[0])
    scale = size / largest
    return (
        f"not run: kazoo's TreeCache took {run['seconds']:.0f} s to load {largest:,} leaves "
        f"and {run['resync_requests']:,} requests to resync them in this run, both linear in "
        f"nodes: {size:,} would take about {run['seconds'] * scale / 60:.0f} min to load, as "
        f"long again to re-read on reconnect, and about "
        f"{run['rss_added_bytes'] * scale / 2**30:.1f} GB of client memory; beyond this "
        "run's 25-minute budget"
    )


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(*sys.argv[2:5])
