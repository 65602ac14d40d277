"""Draw a scale run (benchmarks/scale.py's JSON) as PNGs: one per family, ours beside kazoo's.

    python benchmarks/plot_scale.py [--json FILE] [--out-dir DIR]

Reads the newest ``benchmarks/results/scale-*.json`` by default and writes
``scale-handoff.png``, ``scale-tree.png``, ``scale-queue.png`` and
``scale-sessions.png`` into ``docs/img/`` (a family whose section the run
lacks is left out). Needs matplotlib (the ``bench`` extra); nothing else in
the project does. Curator appears only where ``benchmarks/results/locks-*.json``
holds a Curator figure for the same thing: a hand-off (none yet; the
uncontended cycle, which it has, is another thing).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
IMAGES = HERE.parent / "docs" / "img"
OURS, KAZOO, CURATOR = "tab:blue", "tab:orange", "tab:green"
#: Ours and kazoo's differ in marker too: where they coincide (1 notification), both show.
MARK = {OURS: "o", KAZOO: "s"}
#: Ours drawn larger, so that where the two coincide both stay visible.
SIZE = {OURS: 8.0, KAZOO: 4.5}


def _look(color: str) -> dict[str, Any]:
    """One implementation's line: its colour, marker and marker size."""
    return {"marker": MARK[color], "markersize": SIZE[color], "color": color}


Doc = dict[str, Any]


def newest_run() -> Path:
    def date(path: Path) -> str:
        found = re.search(r"\d{4}-\d{2}-\d{2}", path.name)
        return found.group(0) if found else ""

    runs = sorted(RESULTS.glob("scale-*.json"), key=lambda path: (date(path), path.name))
    if not runs:
        raise SystemExit(f"no scale-*.json in {RESULTS}: run benchmarks/scale.py --out first")
    return runs[-1]


def curator_handoff_ms() -> float | None:
    """Curator's hand-off p50 from a locks run, if any has one (the same thing as ours)."""
    for path in sorted(RESULTS.glob("locks-*.json")):
        handoff = json.loads(path.read_text()).get("handoff") or {}
        if "curator_mutex" in handoff:
            return float(handoff["curator_mutex"]["p50_ms"])
    return None


#: Plain numbers on the axes (1, 10, 1,000; 0.5, 20), not powers of ten.
_PLAIN = FuncFormatter(lambda value, _position: f"{value:,.10g}")


def _axis(ax: Axes, title: str, xlabel: str, ylabel: str, *, logy: bool = False) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_PLAIN)
    if logy and ax.dataLim.height > 0:  # a log axis needs data (a figure a run lacks: none)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_PLAIN)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda _value, _position: ""))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _series(block: Doc, impl: str, *keys: str) -> tuple[list[int], list[float]]:
    """(x, y) over the counts of ``block`` where ``impl`` has the figure ``keys``."""
    xs, ys = [], []
    for count, entry in sorted(block.items(), key=lambda item: int(item[0])):
        value: Any = entry.get(impl)
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            xs.append(int(count))
            ys.append(float(value))
    return xs, ys


def _save(fig: Any, out_dir: Path, name: str, title: str, run: str) -> Path:
    fig.suptitle(f"{title}: ours beside kazoo's ({run})", fontsize=11)
    fig.tight_layout()
    path = out_dir / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def handoff(doc: Doc, out_dir: Path, run: str) -> Path | None:
    modes: list[tuple[str, Doc]] = [
        (mode, doc[f"handoff_{mode}"])
        for mode in ("threads", "processes")
        if doc.get(f"handoff_{mode}")
    ]
    if not modes:
        return None
    fig, (latency, requests, notes) = plt.subplots(1, 3, figsize=(15, 4.5))
    for mode, section in modes:
        style = "-" if mode == "threads" else "--"
        for impl, label, color in (("ours", "ours", OURS), ("kazoo_lock", "kazoo Lock", KAZOO)):
            block = section["waiters"]
            xs, p50 = _series(block, impl, "handoff", "p50_ms")
            _, p90 = _series(block, impl, "handoff", "p90_ms")
            latency.plot(
                xs,
                p50,
                style,
                **_look(color),
                label=f"{label}, {mode} (p50)",
            )
            latency.plot(
                xs, p90, style, marker=".", color=color, alpha=0.4, label=f"{label}, {mode} (p90)"
            )
            xs, ys = _series(block, impl, "requests_per_handoff")
            requests.plot(
                xs,
                ys,
                style,
                **_look(color),
                label=f"{label}, {mode}",
            )
            xs, ys = _series(block, impl, "notifications_per_release")
            notes.plot(
                xs,
                ys,
                style,
                **_look(color),
                label=f"{label}, {mode}",
            )
    curator = curator_handoff_ms()
    if curator is not None:
        latency.plot([1], [curator], "s", color=CURATOR, label="Curator (locks.py, 1 waiter)")
    latency.set_ylim(bottom=0)
    requests.set_ylim(bottom=0)
    notes.set_ylim(0, 2)
    _axis(latency, "hand-off: release to the next acquire", "waiters", "ms")
    _axis(requests, "server requests per hand-off", "waiters", "requests")
    _axis(notes, "watch notifications per release", "waiters", "notifications")
    return _save(fig, out_dir, "scale-handoff", "Lock hand-off as waiters grow", run)


def tree(doc: Doc, out_dir: Path, run: str) -> Path | None:
    section = doc.get("tree")
    if not section:
        return None
    sizes = section["sizes"]
    fig, (load, rss, resync) = plt.subplots(1, 3, figsize=(15, 4.5))
    for impl, label, color in (("ours", "ours", OURS), ("kazoo", "kazoo TreeCache", KAZOO)):
        xs, ys = _series(sizes, impl, "seconds")
        load.plot(xs, ys, **_look(color), label=label)
        xs, ys = _series(sizes, impl, "rss_added_bytes")
        rss.plot(
            xs,
            [y / 2**20 for y in ys],
            **_look(color),
            label=label,
        )
        xs, ys = _series(sizes, impl, "resync_requests")
        resync.plot(xs, ys, **_look(color), label=label)
    _axis(load, "load: start() to initialized", "leaves", "seconds", logy=True)
    _axis(rss, "client RSS the load added", "leaves", "MB", logy=True)
    _axis(resync, "requests of a resync (10 changed)", "leaves", "requests", logy=True)
    return _save(fig, out_dir, "scale-tree", "TreeCache as the tree grows", run)


def queue(doc: Doc, out_dir: Path, run: str) -> Path | None:
    section = doc.get("queue")
    if not section:
        return None
    fig, (rate, requests) = plt.subplots(1, 2, figsize=(11, 4.5))
    lines = (
        ("ours", "ours, at most once", OURS, "-"),
        ("ours_locked", "ours, lock-safe", OURS, "--"),
        ("kazoo", "kazoo Queue", KAZOO, "-"),
        ("kazoo_locking", "kazoo LockingQueue", KAZOO, "--"),
    )
    for impl, label, color, style in lines:
        xs, ys = _series(section["consumers"], impl, "items_per_s")
        rate.plot(xs, ys, style, **_look(color), label=label)
        xs, ys = _series(section["consumers"], impl, "requests_per_item")
        requests.plot(xs, ys, style, **_look(color), label=label)
    rate.set_ylim(bottom=0)
    requests.set_ylim(bottom=0)
    producers = section["producers"]
    _axis(rate, f"items/s, {producers} producers", "consumers", "items/s")
    _axis(requests, "server requests per item", "consumers", "requests")
    counts = sorted(int(c) for c in section["consumers"])
    for ax in (rate, requests):  # after the log scale, which sets ticks of its own
        ax.set_xticks(counts)
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _value, _position: ""))
    return _save(fig, out_dir, "scale-queue", "Queue throughput as consumers grow", run)


def sessions(doc: Doc, out_dir: Path, run: str) -> Path | None:
    section = doc.get("sessions")
    if not section:
        return None
    fig, (threads, rss, pings, cpu) = plt.subplots(1, 4, figsize=(19, 4.5))
    for impl, label, color in (("ours", "ours ZkClient", OURS), ("kazoo", "KazooClient", KAZOO)):
        block = section["counts"]
        xs, ys = _series(block, impl, "threads_os")
        threads.plot(xs, ys, **_look(color), label=label)
        xs, ys = _series(block, impl, "rss_added_bytes")
        rss.plot(
            xs,
            [y / 2**20 for y in ys],
            **_look(color),
            label=label,
        )
        xs, ys = _series(block, impl, "server_pings_per_s")
        pings.plot(xs, ys, **_look(color), label=label)
        xs, ys = _series(block, impl, "idle_cpu_percent")
        keep = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0]  # a log axis has no 0
        cpu.plot(
            [x for x, _ in keep],
            [y for _, y in keep],
            **_look(color),
            label=label,
        )
    timeout = section["session_timeout_s"]
    _axis(threads, "threads of the process", "clients", "threads", logy=True)
    _axis(rss, "RSS the clients added", "clients", "MB", logy=True)
    _axis(
        pings,
        f"pings/s on the server (idle, {timeout:g} s sessions)",
        "clients",
        "per s",
        logy=True,
    )
    _axis(cpu, "process CPU while idle (100 = one core)", "clients", "%", logy=True)
    return _save(fig, out_dir, "scale-sessions", "Sessions as clients grow", run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--json", type=Path, help="a scale run (default: the newest in results/)")
    parser.add_argument("--out-dir", type=Path, default=IMAGES, help=f"default: {IMAGES}")
    args = parser.parse_args(argv)
    source: Path = args.json or newest_run()
    doc: Doc = json.loads(source.read_text())
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for family in (handoff, tree, queue, sessions):
        written = family(doc, args.out_dir, source.name)
        if written is not None:
            print(f"wrote {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
