"""Sessions as clients are added: threads, memory and pings of N idle clients in one process.

Each count runs in a fresh child process (``python _scale_sessions.py child IMPL
HOSTS COUNT``): it raises its soft limit of open files if N clients need more,
starts N clients one after another (our ``ZkClient`` or kazoo's
``KazooClient``, both with a 10 s session), and reports the threads of the
process (``threading.active_count()`` and the kernel's count in
``/proc/self/status``), the RSS the clients added and the open file
descriptors. Then, with every client idle, the server's packets over a window
(less the ``mntr`` reads) give the pings per second it sees; the clients count
the pings (and our session-proving syncs) they sent over the same window.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from typing import IO, Any

from _common import Target, count_pings, progress, ratio

SESSION_TIMEOUT_S = 10.0
#: Clients still not started after this long are not started: the JSON says how many were.
START_BUDGET_S = 240.0
#: How long a child may take to answer between phases (one busy with 4,000 threads is slow).
ANSWER_LIMIT_S = 300.0
#: File descriptors per client, with room: a socket, kazoo's wake-up pipe, and spares.
FDS_PER_CLIENT = 6


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _os_threads() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def raise_fd_limit(needed: int) -> dict[str, Any]:
    """Raise the soft limit of open files to ``needed`` if it is lower (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    out: dict[str, Any] = {"needed": needed, "soft_before": soft, "hard": hard}
    if soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError) as exc:
            out["raise_failed"] = repr(exc)
    out["soft_after"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    out["enough"] = out["soft_after"] >= needed
    return out


def child(impl: str, hosts: str, count_text: str, budget_text: str) -> None:
    """Start ``count`` clients (for ``budget`` seconds at most); report; idle; close."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    count, budget_s = int(count_text), float(budget_text)
    limits = raise_fd_limit(count * FDS_PER_CLIENT + 256)
    from kazoo.client import KazooClient

    from zk_recipes import ZkClient

    before, threads_before = _rss(), _os_threads()
    clients: list[Any] = []
    changes: collections.Counter[str] = collections.Counter()
    peak_threads = 0
    began = time.monotonic()
    for index in range(count):
        if time.monotonic() - began > budget_s:
            break
        if impl == "ours":
            client = ZkClient(hosts, session_timeout=SESSION_TIMEOUT_S)
            client.add_listener(lambda change: changes.update([change.state.name]))
            clients.append(client.start())
        else:
            kz = KazooClient(hosts, timeout=SESSION_TIMEOUT_S)
            kz.add_listener(lambda state: changes.update([str(state)]))
            kz.start(timeout=60)
            clients.append(kz)
        if index % 100 == 99:
            peak_threads = max(peak_threads, _os_threads())
            print(f"  {impl}: {index + 1} clients, {_os_threads()} threads", file=sys.stderr)
    connect_s = time.monotonic() - began
    kazoo_clients = [c.kazoo_client if impl == "ours" else c for c in clients]
    counters = [count_pings(kz) for kz in kazoo_clients]
    time.sleep(1.0)
    _say(
        event="ready",
        started=len(clients),
        start_budget_s=budget_s,
        connect_s=round(connect_s, 2),
        threads_os_peak_while_starting=max(peak_threads, _os_threads()),
        threads_python=threading.active_count(),
        threads_os=_os_threads(),
        threads_os_before=threads_before,
        rss_added_bytes=_rss() - before,
        open_fds=len(os.listdir("/proc/self/fd")),
        fd_limit=limits,
    )
    sys.stdin.readline()  # "window"
    first, cpu = sum(c.value for c in counters), time.process_time()
    _say(event="window")
    sys.stdin.readline()  # "end"
    _say(
        event="counted",
        client_pings=sum(c.value for c in counters) - first,
        cpu_s=time.process_time() - cpu,
        state_changes=dict(changes),
        threads_os_after_window=_os_threads(),
    )
    began = time.monotonic()
    for client in clients:
        if impl == "ours":
            client.close()
        else:
            client.stop()
            client.close()
    _say(event="closed", close_s=round(time.monotonic() - began, 2))


class _Child:
    def __init__(self, impl: str, hosts: str, count: int, budget_s: float) -> None:
        command = [sys.executable, __file__, "child", impl, hosts, str(count), str(budget_s)]
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
            raise RuntimeError(f"the child ended before {event!r} (exit {self.proc.wait()})")
        message: dict[str, Any] = json.loads(line)
        if message.pop("event", None) != event:
            raise RuntimeError(f"expected {event!r} from the child, got {message}")
        return message

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()


def session_trial(target: Target, impl: str, count: int, window_s: float) -> dict[str, Any]:
    """One child's figures; a phase that fails after the clients started keeps what it had."""
    proc = _Child(impl, target.hosts, count, START_BUDGET_S)
    result: dict[str, Any] = {"clients": count}
    try:
        result.update(proc.expect("ready", START_BUDGET_S + 120.0))
        result["server_connections"] = int(target.mntr()["zk_num_alive_connections"])
        # A process busy with its clients' threads answers late: how late is a figure too.
        asked = time.monotonic()
        proc.tell("window")
        proc.expect("window", ANSWER_LIMIT_S)
        result["answer_s"] = round(time.monotonic() - asked, 2)
        before, began = target.packets(), time.monotonic()
        time.sleep(window_s)
        packets = target.packets() - before - target.mntr_overhead
        elapsed = time.monotonic() - began
        proc.tell("end")
        counted = proc.expect("counted", ANSWER_LIMIT_S)
        result.update(
            server_pings_per_s=round((packets - target.foreign_rate * elapsed) / elapsed, 2),
            client_pings_per_s=round(counted["client_pings"] / elapsed, 2),
            idle_cpu_percent=round(100 * counted["cpu_s"] / elapsed, 1),
            state_changes=counted["state_changes"],
            threads_os_after_window=counted["threads_os_after_window"],
        )
        result.update(proc.expect("closed", 300.0))
    except (queue.Empty, RuntimeError) as exc:
        phase = "after the clients started: " if "started" in result else ""
        result["failed"] = f"{phase}{exc!r} (a child that does not answer in time)"
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
        proc.proc.wait(10)
    if "started" in result:
        started = max(1, int(result["started"]))
        result["rss_added_bytes_per_client"] = round(result["rss_added_bytes"] / started)
        threads = result["threads_os"] - result["threads_os_before"]
        result["threads_per_client"] = round(threads / started, 2)
    return result


def run(target: Target, counts: list[int], window_s: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for index, count in enumerate(counts):
        by_impl: dict[str, Any] = {}
        for impl in ("ours", "kazoo") if index % 2 == 0 else ("kazoo", "ours"):
            progress(f"sessions: {count} clients, {impl}")
            by_impl[impl] = session_trial(target, impl, count, window_s)
            if "failed" in by_impl[impl]:
                progress(f"sessions: {count} {impl} failed: {by_impl[impl]['failed']}")
                continue
            progress(
                f"sessions: {count} {impl}: {by_impl[impl]['threads_os']} threads, "
                f"{by_impl[impl]['rss_added_bytes'] / 2**20:.1f} MB, "
                f"{by_impl[impl]['server_pings_per_s']} pings/s"
            )
        ours, kazoo = by_impl["ours"], by_impl["kazoo"]
        results[str(count)] = {"ours": ours, "kazoo": kazoo}
        if "server_pings_per_s" in ours and "server_pings_per_s" in kazoo:
            results[str(count)]["ours_over_kazoo"] = {
                key: ratio(ours[key], kazoo[key])
                for key in ("threads_os", "rss_added_bytes", "server_pings_per_s")
            }
    return {
        "clients_are": "idle clients of one process, started one after another",
        "session_timeout_s": SESSION_TIMEOUT_S,
        "window_s": window_s,
        "counts": results,
    }


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(*sys.argv[2:6])
