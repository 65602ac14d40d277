"""Shared pieces of the benchmarks: statistics, server counters, worker fleets, output.

Benchmarks here never assert wall-clock figures; they print one JSON document
(stdout) and talk to people on stderr. Every comparison is made *in one run*
against one server, interleaved in rotating rounds so that machine noise hits
all contestants alike. Request counts come from the server (``mntr``'s
``zk_packets_received``), corrected for what is not the code under test: the
packet each ``mntr`` read adds itself, the pings our own clients sent (counted
client-side), and foreign traffic measured over a quiet interval.

kazoo is untyped; the few places that reach into its connection object
(``count_pings``, ``count_watch_events``) are confined to this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import platform
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# -- statistics -----------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        return math.nan
    rank = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50.0)


def latency_summary(samples_ns: Sequence[int]) -> dict[str, float]:
    """p50/p90/p99/mean/min/max in milliseconds, rounded for reading."""
    ms = sorted(s / 1e6 for s in samples_ns)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 4),
        "p90_ms": round(percentile(ms, 90), 4),
        "p99_ms": round(percentile(ms, 99), 4),
        "mean_ms": round(sum(ms) / len(ms), 4),
        "min_ms": round(ms[0], 4),
        "max_ms": round(ms[-1], 4),
    }


def ratio(numerator: float, denominator: float, digits: int = 3) -> float | None:
    if not denominator or math.isnan(numerator) or math.isnan(denominator):
        return None
    return round(numerator / denominator, digits)


def rotating_rounds(names: Sequence[str], rounds: int) -> Iterator[tuple[int, list[str]]]:
    """``(round, order)`` with the order rotated each round: a, b, c / b, c, a / c, a, b ..."""
    items = list(names)
    for index in range(rounds):
        shift = index % len(items)
        yield index, items[shift:] + items[:shift]


# -- output -------------------------------------------------------------------------------

_T0 = time.monotonic()


def progress(message: str) -> None:
    """One line of progress on stderr (stdout carries only the JSON document)."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def emit(document: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(document, indent=2, sort_keys=False)
    if out is not None:
        out.write_text(text + "\n")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def base_arguments(description: str, sections: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="fewer cycles, shorter runs")
    parser.add_argument("--out", type=Path, help="also write the JSON document to this file")
    parser.add_argument(
        "--hosts",
        help="one existing server HOST:PORT (its four-letter words mntr and srvr must be "
        "allowed) instead of a throwaway server",
    )
    parser.add_argument(
        "--sections",
        default=",".join(sections),
        help=f"comma-separated subset of: {', '.join(sections)} (default: all)",
    )
    return parser


def parse_sections(text: str, known: Sequence[str]) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in known]
    if unknown or not chosen:
        raise SystemExit(f"--sections: unknown {unknown or text!r}; choose from {list(known)}")
    return chosen


def machine_meta() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "load_avg": load_average(),
    }


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# -- the server: four-letter words and packet counts ----------------------------------------


def four_letter(host: str, port: int, command: str, timeout: float = 5.0) -> str:
    """Send a four-letter word; return the whole answer."""
    chunks: list[bytes] = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def parse_mntr(text: str) -> dict[str, str]:
    """``mntr``'s tab-separated ``key value`` lines as a dict of strings."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            result[key.strip()] = value.strip()
    return result


@dataclass
class Target:
    """The server under test: where clients connect, and its counters."""

    hosts: str
    owned: bool
    options: dict[str, Any] = field(default_factory=dict)
    #: Unique znode root for this run, so runs against a shared server never collide.
    root: str = field(default_factory=lambda: f"/zk-recipes-bench/{uuid.uuid4().hex[:12]}")
    #: Packets one ``mntr`` read adds to ``zk_packets_received`` (calibrated).
    mntr_overhead: int = 0
    #: Packets/s from clients that are not ours (measured over a quiet interval).
    foreign_rate: float = 0.0

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.hosts.rpartition(":")
        return host.strip("[]"), int(port)

    def four_letter(self, command: str) -> str:
        return four_letter(*self.address, command)

    def mntr(self) -> dict[str, str]:
        return parse_mntr(self.four_letter("mntr"))

    def packets(self) -> int:
        return int(self.mntr()["zk_packets_received"])

    def watch_count(self) -> int:
        return int(self.mntr()["zk_watch_count"])

    def version(self) -> str:
        first = self.four_letter("srvr").splitlines()[0]
        return first.partition(":")[2].strip() or first

    def remove_root(self, admin: Any) -> None:
        """Delete this run's znodes with ``admin`` (a kazoo client), and the shared
        parent too if no other run left anything there. Best effort: a run's
        results matter more than its clean-up."""
        with contextlib.suppress(Exception):
            admin.delete(self.root, recursive=True)
        with contextlib.suppress(Exception):
            admin.delete(self.root.rpartition("/")[0])  # only if empty

    def calibrate(self, quiet_s: float) -> None:
        """Measure the ``mntr`` overhead, then foreign traffic over ``quiet_s`` seconds."""
        deltas = []
        for _ in range(3):
            before = self.packets()
            deltas.append(self.packets() - before)
        self.mntr_overhead = min(deltas)
        before, started = self.packets(), time.monotonic()
        time.sleep(quiet_s)
        quiet = self.packets() - before - self.mntr_overhead
        self.foreign_rate = max(0.0, quiet / (time.monotonic() - started))


def quiet_packets(target: Target, quiet_s: float = 1.0, limit_s: float = 120.0) -> int:
    """Requests until the server has seen none (beyond a ping or two) for ``quiet_s``."""
    total, previous = 0, target.packets()
    calm_since = time.monotonic()
    deadline = calm_since + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        current = target.packets()
        delta = current - previous - target.mntr_overhead
        previous = current
        if delta > 2:
            total += delta
            calm_since = time.monotonic()
        elif time.monotonic() - calm_since >= quiet_s:
            break
    return total


@dataclass
class PacketWindow:
    """Server packets over a window, minus mntr overhead, our pings and foreign traffic."""

    target: Target
    pings: Callable[[], int]
    _packets: int = 0
    _pings: int = 0
    _started: float = 0.0
    raw: int = 0
    corrected: float = 0.0
    pings_sent: int = 0

    def __enter__(self) -> PacketWindow:
        self._pings = self.pings()
        self._packets = self.target.packets()
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc_info: object) -> None:
        elapsed = time.monotonic() - self._started
        self.raw = self.target.packets() - self._packets - self.target.mntr_overhead
        self.pings_sent = self.pings() - self._pings
        foreign = self.target.foreign_rate * elapsed
        self.corrected = self.raw - self.pings_sent - foreign


@contextlib.contextmanager
def server_target(hosts: str | None, **server_options: Any) -> Iterator[Target]:
    """``--hosts`` given: that server. Otherwise a throwaway ZooKeeperServer, closed on exit."""
    if hosts:
        if "," in hosts or "/" in hosts:
            raise SystemExit(
                "--hosts takes exactly one server HOST:PORT without a chroot: request counts "
                "are read from that server's mntr"
            )
        yield Target(hosts=hosts, owned=False)
        return
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer(**server_options) as server:
        yield Target(hosts=server.connect_string, owned=True, options=dict(server_options))


# -- kazoo instrumentation ------------------------------------------------------------------

#: ZooKeeper's opcode of sync.
_SYNC_TYPE = 9


@dataclass
class Counter:
    value: int = 0


def count_pings(kazoo_client: Any) -> Counter:
    """Count the pings this kazoo client sends (they reach zk_packets_received too).

    Also the syncs kazoo's thread writes: a ZkClient sends one when nothing has
    proved its session for a sixth of the timeout (docs/client.md), which is
    upkeep like a ping, not work of the code under test. The benchmarks send no
    sync of their own.
    """
    counter = Counter()
    connection = kazoo_client._connection
    send_ping = connection._send_ping
    send_request = connection._send_request

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter.value += 1
        return send_ping(*args, **kwargs)

    def counting_syncs(*args: Any, **kwargs: Any) -> Any:
        queued = kazoo_client._queue
        if queued and getattr(queued[0][0], "type", None) == _SYNC_TYPE:
            counter.value += 1
        return send_request(*args, **kwargs)

    connection._send_ping = counting
    connection._send_request = counting_syncs
    return counter


def count_watch_events(kazoo_client: Any) -> Counter:
    """Count the watch notifications the server delivers to this kazoo client."""
    counter = Counter()
    connection = kazoo_client._connection
    read_watch_event = connection._read_watch_event

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter.value += 1
        return read_watch_event(*args, **kwargs)

    connection._read_watch_event = counting
    return counter


# -- worker processes with a start barrier --------------------------------------------------

Message = tuple[str, Any]


class WorkerPool:
    """``count`` processes (multiprocessing 'spawn'), each talking to us over its own pipe.

    ``target(conn)`` runs in each worker; it should return when ``recv`` gives
    ``("exit", None)`` or raises EOFError (we are gone). ``close()`` asks them
    to exit, then terminates and kills stragglers: no process outlives us.
    """

    def __init__(self, count: int, target: Callable[[Any], None]) -> None:
        context = multiprocessing.get_context("spawn")
        self._conns: list[multiprocessing.connection.Connection] = []
        self._procs: list[Any] = []
        try:
            for index in range(count):
                ours, theirs = context.Pipe()
                proc = context.Process(
                    target=target, args=(theirs,), name=f"bench-worker-{index}", daemon=True
                )
                proc.start()
                theirs.close()
                self._conns.append(ours)
                self._procs.append(proc)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, indices: Sequence[int], message: Message) -> None:
        for index in indices:
            self._conns[index].send(message)

    def gather(self, indices: Sequence[int], expect: str, timeout: float) -> list[Any]:
        """One ``(expect, payload)`` from each worker, in order; raise on errors or timeout."""
        deadline = time.monotonic() + timeout
        payloads: list[Any] = []
        for index in indices:
            conn = self._conns[index]
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"worker {index} sent no {expect!r} within {timeout:g} s")
            tag, payload = conn.recv()
            if tag != expect:
                raise RuntimeError(f"worker {index} sent {tag!r} instead of {expect!r}: {payload}")
            payloads.append(payload)
        return payloads

    def start_together(self, indices: Sequence[int], lead_s: float = 0.2) -> int:
        """The barrier's second half: every worker has said "ready"; tell all when to start.

        The start time is on ``time.monotonic_ns()``, which is system-wide on
        Linux, so every worker starts at the same instant however late the
        message reaches it.
        """
        start_ns = time.monotonic_ns() + int(lead_s * 1e9)
        self.send(indices, ("go", start_ns))
        return start_ns

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("exit", None))
        deadline = time.monotonic() + 10.0
        for proc in self._procs:
            proc.join(max(0.1, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []


def wait_for_go(conn: Any, timeout: float) -> int:
    """Worker side of the barrier: after sending "ready", block until "go"; sleep to start."""
    if not conn.poll(timeout):
        raise TimeoutError(f"no 'go' within {timeout:g} s")
    tag, start_ns = conn.recv()
    if tag != "go":
        raise RuntimeError(f"expected 'go', got {tag!r}")
    sleep_until_ns(int(start_ns))
    return int(start_ns)


def sleep_until_ns(when_ns: int) -> None:
    remaining = (when_ns - time.monotonic_ns()) / 1e9
    if remaining > 0:
        time.sleep(remaining)
