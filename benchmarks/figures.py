"""The latest recorded figures of every benchmark, as one Markdown page (docs/evidence/figures.md).

Each benchmark's newest full run in ``benchmarks/results/`` (by the date in
its name, then its start time; ``--quick`` runs left out) gives a few tables:
ours beside kazoo's recipe (and Curator's, the raw floor or celery-singleton
where the run has them), medians and ratios, requests and client CPU. The
page is generated, never edited: ``python benchmarks/figures.py`` rewrites
it, and tests/test_docs.py fails when it differs from what the results say,
so a new run's JSON and the page land together.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "figures.md"

Doc = dict[str, Any]
Lines = Iterator[str]


def latest(pattern: str, having: str | None = None) -> tuple[Path, Doc]:
    """The newest full run among the results whose name matches ``pattern`` (and that
    has the section ``having``), and its document."""
    runs = [
        (path, doc)
        for path in RESULTS.glob("*.json")
        if re.fullmatch(pattern, path.name)
        and not _quick(doc := _load(path))
        and (having is None or having in doc)
    ]
    if not runs:
        with_section = f" with {having!r}" if having else ""
        raise SystemExit(f"no full run in {RESULTS} matches {pattern}{with_section}")

    def order(run: tuple[Path, Doc]) -> tuple[str, str]:
        path, doc = run
        date = re.search(r"(\d{4}-\d{2}-\d{2})", path.name)
        started = doc.get("meta", {}).get("started_at") or doc.get("when", "")
        return (date.group(1) if date else "", str(started))

    return max(runs, key=order)


def _quick(doc: Doc) -> bool:
    return bool(doc.get("meta", doc).get("quick"))


def _table(header: list[str], rows: list[list[str]]) -> Lines:
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    for row in rows:
        yield "| " + " | ".join(row) + " |"
    yield ""


def _n(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _source(path: Path, doc: Doc) -> str:
    machine = doc.get("meta", doc).get("machine")
    if not machine:
        return f"`benchmarks/results/{path.name}`."
    where = f"{machine['cpu_count']} cores"
    if machine.get("load_avg"):
        where += f", load average {machine['load_avg'][0]:.1f} at the start"
    return f"`benchmarks/results/{path.name}` ({where})."


def _heading(title: str, path: Path, doc: Doc) -> Lines:
    """A section's title and the run its figures come from."""
    yield title
    yield ""
    yield _source(path, doc)
    yield ""


def locks(path: Path, doc: Doc) -> Lines:
    yield from _heading("## Locks (`locks.py`)", path, doc)
    yield "One client, acquire and release in a loop:"
    yield ""
    names = {
        "raw_floor": "raw floor (3 sync calls)",
        "kazoo_lock": "kazoo `Lock`",
        "ours": "ours",
        "curator_mutex": "Curator `InterProcessMutex`",
    }
    uncontended = doc["uncontended"]
    rows = [
        [
            label,
            _n(uncontended[key]["p50_ms"], 3),
            _n(uncontended[key]["cycles_per_s"], 0),
            _n(uncontended[key]["client_cpu_ms_per_cycle"], 3),
            _n(uncontended[key]["requests_per_cycle"], 1),
        ]
        for key, label in names.items()
        if key in uncontended
    ]
    yield from _table(["", "p50 ms", "cycles/s", "client CPU ms/cycle", "requests/cycle"], rows)
    ratios = uncontended["ratios"]
    yield (
        f"Ours against kazoo's: p50 {_x(ratios['paired_median_ours_over_kazoo_lock_p50'])} "
        f"(paired median over rounds), throughput "
        f"{_x(ratios['paired_median_ours_over_kazoo_lock_cycles_per_s'])}, client CPU "
        f"{_x(ratios['ours_over_kazoo_lock_client_cpu_per_cycle'])}."
    )
    yield ""
    handoff = doc["handoff"]
    yield (
        f"Hand-off to a waiting process, p50: kazoo {_n(handoff['kazoo_lock']['p50_ms'], 3)} ms, "
        f"ours {_n(handoff['ours']['p50_ms'], 3)} ms "
        f"({_x(handoff['ratios']['paired_median_ours_over_kazoo_lock_p50'])})."
    )
    yield ""
    yield "Contention, every process acquiring and releasing one lock:"
    yield ""
    rows = []
    for processes, run in sorted(doc["contended"].items(), key=lambda item: int(item[0])):
        kazoo, ours = run["kazoo_lock"], run["ours"]
        rows.append(
            [
                processes,
                _n(kazoo["cycles_per_s"], 0),
                _n(ours["cycles_per_s"], 0),
                _x(run["ratios"]["median_round_ours_over_kazoo_lock_cycles_per_s"]),
                f"{_n(kazoo['requests_per_cycle'], 1)} / {_n(ours['requests_per_cycle'], 1)}",
                str(kazoo["exclusion_violations"] + ours["exclusion_violations"]),
            ]
        )
    yield from _table(
        [
            "processes",
            "kazoo cycles/s",
            "ours cycles/s",
            "ours/kazoo",
            "requests/cycle (kazoo / ours)",
            "exclusion violations",
        ],
        rows,
    )
    watch = doc["watch_notifications"]
    rows = [[n, str(counts["kazoo_lock"]), str(counts["ours"])] for n, counts in watch.items()]
    yield "Watch notifications per release, by the number of waiters:"
    yield ""
    yield from _table(["waiters", "kazoo", "ours"], rows)


def leader(path: Path, doc: Doc) -> Lines:
    yield from _heading("## Leader election (`leader.py`)", path, doc)
    graceful, kill = doc["graceful"], doc["kill"]
    rows = [
        [
            "failover after a graceful close, p50",
            f"{_n(graceful['kazoo_election']['p50_ms'], 3)} ms",
            f"{_n(graceful['ours']['p50_ms'], 3)} ms",
            _x(graceful["ratios"]["paired_median_ours_over_kazoo_election_p50"]),
        ],
        [
            f"failover after kill -9 (session {kill['session_timeout_s']:g} s), median",
            f"{_n(kill['kazoo_election']['median_s'])} s",
            f"{_n(kill['ours']['median_s'])} s",
            _x(kill["ratios"]["ours_median_over_kazoo_election_median"]),
        ],
    ]
    yield from _table(["", "kazoo `Election`", "our `LeaderLatch`", "ours/kazoo"], rows)


def caches(path: Path, doc: Doc, floor: Doc) -> Lines:
    yield from _heading("## Caches (`caches.py`)", path, doc)
    yield "A `TreeCache` of a whole tree, ours beside kazoo's (medians of the runs):"
    yield ""
    rows = []
    for size, run in doc["load"].items():
        ours, kazoo = run["ours"], run["kazoo"]
        rows.append(
            [
                f"load {int(size):,} nodes",
                f"{_n(kazoo['load_s_median'])} s, {kazoo['rss_bytes_per_node_median']:,.0f} B/node",
                f"{_n(ours['load_s_median'])} s, {ours['rss_bytes_per_node_median']:,.0f} B/node",
                f"{kazoo['requests_median']:,.0f} / {ours['requests_median']:,.0f}",
            ]
        )
    reconnect = doc["reconnect"]
    rows.append(
        [
            f"reconnect, {reconnect['nodes']:,} nodes",
            "",
            "",
            f"{reconnect['kazoo']['requests_median']:,.0f} / "
            f"{reconnect['ours']['requests_median']:,.0f}",
        ]
    )
    latency = doc["latency"]
    for kind, label in (("tree", "`TreeCache`"), ("node", "`NodeCache`")):
        kazoo, ours = latency[f"{kind}_kazoo"], latency[f"{kind}_ours"]
        rows.append(
            [
                f"{label}: a change seen, p50",
                f"{_n(kazoo['latency']['p50_ms'], 3)} ms, "
                f"{kazoo['process_cpu_s_per_change_median'] * 1e6:,.0f} µs CPU",
                f"{_n(ours['latency']['p50_ms'], 3)} ms, "
                f"{ours['process_cpu_s_per_change_median'] * 1e6:,.0f} µs CPU",
                f"{_n(kazoo['requests_per_change_median'], 1)} / "
                f"{_n(ours['requests_per_change_median'], 1)}",
            ]
        )
    mix = floor["mix"]
    for kind, label in (
        ("create", "a leaf created"),
        ("change", "a leaf's data changed"),
        ("delete", "a leaf deleted"),
    ):
        rows.append(
            [
                f"{label} ({mix['nodes']:,} nodes)",
                "",
                "",
                f"{_n(mix['kazoo'][f'requests_per_{kind}_median'], 1)} / "
                f"{_n(mix['ours'][f'requests_per_{kind}_median'], 1)}",
            ]
        )
    rows.append(
        [
            "a third of each",
            "",
            "",
            f"{_n(mix['kazoo']['requests_per_mixed_change'], 2)} / "
            f"{_n(mix['ours']['requests_per_mixed_change'], 2)}",
        ]
    )
    yield from _table(["", "kazoo", "ours", "requests (kazoo / ours)"], rows)


def queues(path: Path, doc: Doc) -> Lines:
    yield from _heading("## Queues (`queues.py`)", path, doc)
    yield "One producer, then one consumer, of 2,000 items (medians of the runs):"
    yield ""
    rows = []
    for kind, label in (("plain", "at most once"), ("locked", "with a lock path")):
        for step in ("put", "take"):
            kazoo, ours = doc[kind]["kazoo"][step], doc[kind]["ours"][step]
            rows.append(
                [
                    f"{label}: {step}",
                    f"{kazoo['items_per_s']:,.0f}",
                    f"{ours['items_per_s']:,.0f}",
                    _x(doc[kind][f"{step}_ours_over_kazoo"]["throughput"]),
                    f"{_n(kazoo['requests_per_item'], 1)} / {_n(ours['requests_per_item'], 1)}",
                    f"{kazoo['cpu_us_per_item']:,.0f} / {ours['cpu_us_per_item']:,.0f}",
                ]
            )
    four = doc["four"]
    for kind, label in (("plain", "at most once"), ("locked", "with a lock path")):
        kazoo, ours = four[kind]["kazoo"], four[kind]["ours"]
        rows.append(
            [
                f"{label}: {four['producers']} producers x {four['consumers']} consumers",
                f"{kazoo['items_per_s']:,.0f}",
                f"{ours['items_per_s']:,.0f}",
                _x(four[kind]["ours_over_kazoo"]["throughput"]),
                f"{_n(kazoo['requests_per_item'], 1)} / {_n(ours['requests_per_item'], 1)}",
                f"{kazoo['cpu_us_per_item']:,.0f} / {ours['cpu_us_per_item']:,.0f}",
            ]
        )
    yield from _table(
        [
            "",
            "kazoo items/s",
            "ours items/s",
            "ours/kazoo",
            "requests/item (kazoo / ours)",
            "client CPU µs/item (kazoo / ours)",
        ],
        rows,
    )
    multi = doc["multi"]
    yield (
        f"Ours only, items put {multi['batch']} to a transaction: "
        f"{multi['items_per_s']:,.0f} items/s, {_n(multi['requests_per_item'], 2)} requests/item."
    )
    yield ""


def aio_locks(path: Path, doc: Doc) -> Lines:
    """The uncontended cycle from the newest run (uvloop's loop too where it was
    measured), the contenders from the newest run that has them (a run of the
    uncontended section alone may be newer)."""
    full_path, full = latest(r"aio-locks-.*\.json", having="waiters")
    yield from _heading("## The asyncio lock (`aio_locks.py`)", path, doc)
    yield "One client, acquire and release in a loop (medians of the rounds):"
    yield ""
    u = doc["uncontended"]
    labels = [
        ("sync", "our sync `Lock`"),
        ("aio", "`aio.Lock`, asyncio's loop"),
        ("aio_uvloop", "`aio.Lock`, uvloop's loop"),
        ("kazoo", "kazoo `Lock`"),
    ]
    rows = [
        [
            label,
            f"{_n(u[key]['cycle_ms_median'], 3)} ms",
            f"{_n(u[key]['client_cpu_us_per_cycle_median'], 0)} us",
        ]
        for key, label in labels
        if key in u
    ]
    yield from _table(["", "cycle", "client CPU per cycle"], rows)
    line = (
        f"`aio.Lock` / sync `Lock`: {_x(u['aio_over_sync'])} the cycle, "
        f"{_x(u['aio_cpu_over_sync'])} the client CPU"
    )
    if "aio_uvloop_over_sync" in u:
        line += (
            f" ({_x(u['aio_uvloop_over_sync'])} and {_x(u['aio_uvloop_cpu_over_sync'])} "
            "on uvloop's loop)"
        )
    yield f"{line}; `aio.Lock` / kazoo: {_x(1 / u['aio_speedup_vs_kazoo'])} the cycle."
    yield ""
    w = full["waiters"]
    if full_path != path:
        yield f"From the newest run with contenders, {_source(full_path, full)}"
        yield ""
    yield f"{w['contenders']:,} contenders queued at once, each taking its lock once:"
    yield ""
    rows = []
    for locks_ in (1, 10):
        for kind in ("coroutines", "threads"):
            run = w[f"{kind}_on_{locks_}"]
            rows.append(
                [
                    f"{kind}, {locks_} lock{'s' if locks_ > 1 else ''}",
                    _n(run["acquisitions_per_s"], 0),
                    f"{_n(run['handoff']['p50_ms'], 1)} / {_n(run['handoff']['p99_ms'], 1)} ms",
                    f"{run['most_threads']:,}",
                    f"{_n(run['rss_growth_kib'] / 1024, 0)} MiB",
                ]
            )
    yield from _table(
        ["", "acquisitions/s", "hand-off p50 / p99", "most threads", "RSS growth"], rows
    )


def celery_overhead(path: Path, doc: Doc) -> Lines:
    yield from _heading("## A singleton task's cost (`celery_overhead.py`)", path, doc)
    worker, requests = doc["results"]["worker_side"], doc["requests"]
    rows = [
        [label, _n(worker[key]["p50_ms"], 3), _n(requests[key]["requests_each"], 1)]
        for key, label in (
            ("plain", "a plain task"),
            ("singleton", "`@singleton_task`"),
            ("singleton_keyed", "`@singleton_task(key=...)`, a new key each run"),
        )
    ]
    yield from _table(["worker side, per run", "p50 ms", "ZooKeeper requests"], rows)
    ratios = doc["results"]["ratios"]
    yield (
        "The singleton's overhead over one in-process lock cycle: "
        f"{_x(ratios['paired_singleton_overhead_over_lock_cycle'])} (paired)."
    )
    yield ""


def celery_publish(path: Path, doc: Doc) -> Lines:
    yield from _heading("## Publish-time deduplication (`celery_publish.py`)", path, doc)
    results = doc["results"]
    rows = []
    contestants = (("plain", "plain"), ("ours", "ours"), ("celery_singleton", "celery-singleton"))
    for key, label in contestants:
        for step in ("first", "duplicate"):
            if step not in results.get(key, {}):
                continue
            run = results[key][step]
            rows.append(
                [
                    f"{label}, {'first publish' if step == 'first' else 'duplicate'}",
                    f"{run['p50_us'] / 1000:.2f}",
                    f"{run['cpu_us_per_publish']:,.0f}",
                    _n(run["zk_requests_per_publish"], 0),
                ]
            )
    yield from _table(["per `.delay()`", "p50 ms", "client CPU µs", "ZooKeeper requests"], rows)


def chaos(path: Path, doc: Doc) -> Lines:
    yield from _heading("## The chaos run (`chaos.py`)", path, doc)
    config, held = doc["config"], doc["locks"]
    rows = [
        ["duration", f"{config['duration']:g} s, {config['workers']} workers"],
        ["session timeout", f"{config['session_timeout']:g} s"],
        ["acquisitions", f"{doc['acquisitions']:,}"],
        ["faults applied", f"{doc['faults_applied']:,} ({len(doc['faults'])} kinds)"],
        ["two holders at once (lock)", str(held["overlaps"])],
        ["two leaders at once", str(doc["leadership"]["overlaps"])],
        ["stale writes accepted", str(held["stale_writes_accepted"])],
        ["loss told after the next holder wrote", str(held["lost_after_next_holder"])],
        ["orphan nodes", str(doc["orphans"])],
    ]
    if "queues" in doc:  # the queue and discovery families (docs/chaos.md)
        q = doc["queues"]
        rows += [
            ["queue items put / consumed", f"{q['items_put']:,} / {q['items_consumed']:,}"],
            ["queue items lost, left", f"{q['items_lost']}, {q['leftovers']}"],
            ["second deliveries without a loss report or kill", str(q["duplicates_unexplained"])],
            ["commits from a claim told lost", str(q["commits_told_lost"])],
        ]
    if "discovery" in doc:
        d = doc["discovery"]
        rows += [
            ["discovery snapshots", f"{d['snapshots']:,}"],
            [
                "ghost / absent / duplicate instances",
                f"{d['ghosts']} / {d['absences']} / {d['duplicates']}",
            ],
        ]
    yield from _table(["", ""], rows)
    yield (
        "Pauses (SIGSTOP) past the session are counted apart: a paused process "
        "cannot be told anything; see [the chaos run](../chaos.md) for what each count means."
    )
    yield ""


# -- cost as work grows (scale.py) ----------------------------------------------------------

#: A step of a curve (on log-log axes) is flat below this slope, linear around 1.
FLAT_SLOPE = 0.15
LINEAR_SLOPES = (0.75, 1.25)


def _v(value: float) -> str:
    """A measured value, with as many digits as it deserves."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _step_kind(slope: float) -> str:
    if abs(slope) < FLAT_SLOPE:
        return "flat"
    if slope < 0:
        return "falls"
    low, high = LINEAR_SLOPES
    if low <= slope <= high:
        return "linear"
    return "sublinear" if slope < low else "superlinear"


def shape(xs: Sequence[int], ys: Sequence[float], unit: str = "") -> str:
    """How a curve grows, from the log-log slope of each step: flat, linear, or where it bends."""
    points = [(x, y) for x, y in zip(xs, ys, strict=True)]
    if len(points) < 2:
        return "one point only"
    if any(y <= 0 for _, y in points):
        return ", ".join(f"{_v(y)}{unit} at {x:,}" for x, y in points)
    slopes = [
        math.log(b / a) / math.log(x2 / x1) for (x1, a), (x2, b) in itertools.pairwise(points)
    ]
    kinds = [_step_kind(slope) for slope in slopes]
    (x0, y0), (xn, yn) = points[0], points[-1]
    span = f"{_v(y0)}{unit} at {x0:,} to {_v(yn)}{unit} at {xn:,}"
    overall = math.log(yn / y0) / math.log(xn / x0)
    if all(kind == "flat" for kind in kinds):
        return f"**flat**: {span}"
    if all(kind == "linear" for kind in kinds):
        return (
            f"**linear**: {span} (x{yn / y0:,.0f} for x{xn // x0:,}; log-log slope {overall:.2f})"
        )
    flat = next(i for i, kind in enumerate(kinds) if kind != "flat")
    if flat and all(kind not in ("flat", "falls") for kind in kinds[flat:]):
        xk, yk = points[flat]
        return (
            f"**flat, then a knee at {xk:,}**: {_v(y0)}{unit} at {x0:,}, {_v(yk)}{unit} at "
            f"{xk:,}, then x{yn / yk:.1f} to {_v(yn)}{unit} at {xn:,}"
        )
    if max(ys) / min(ys) < 1.3:
        values = ", ".join(f"{_v(y)}{unit} at {x:,}" for x, y in points)
        return f"**flat** within x{max(ys) / min(ys):.2f}: {values}"
    steps = "; ".join(
        f"{x1:,} to {x2:,}: x{b / a:.2f} ({kind})"
        for ((x1, a), (x2, b)), kind in zip(itertools.pairwise(points), kinds, strict=True)
    )
    return f"{span} ({steps})"


def _curve(block: Doc, impl: str, *keys: str) -> tuple[list[int], list[float]]:
    """(counts, values) of ``impl``'s figure ``keys`` over a section's counts, where measured."""
    xs, ys = [], []
    for count, entry in sorted(block.items(), key=lambda item: int(item[0])):
        value: Any = entry.get(impl)
        if isinstance(value, dict) and value.get("started", int(count)) < int(count):
            continue  # not every client started: not a point of the curve
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            xs.append(int(count))
            ys.append(float(value))
    return xs, ys


def _shape_of(block: Doc, impl: str, *keys: str, unit: str = "", scale: float = 1.0) -> str:
    xs, ys = _curve(block, impl, *keys)
    return shape(xs, [y * scale for y in ys], unit)


def _pair(kazoo: Doc, ours: Doc, key: str) -> str:
    return f"{_n(kazoo[key], 1)} / {_n(ours[key], 1)}"


def _image(name: str, alt: str) -> Lines:
    yield f"![{alt}](../img/scale-{name}.png)"
    yield ""


def _scale_handoff(doc: Doc) -> Lines:
    yield "### Lock hand-off as waiters grow"
    yield ""
    yield from _image("handoff", "Hand-off latency, requests and notifications against waiters")
    rows = []
    for mode in ("threads", "processes"):
        section = doc.get(f"handoff_{mode}")
        for waiters, run in sorted(
            (section or {}).get("waiters", {}).items(), key=lambda i: int(i[0])
        ):
            kazoo, ours = run["kazoo_lock"], run["ours"]
            rows.append(
                [
                    f"{int(waiters):,}",
                    mode,
                    f"{_n(kazoo['handoff']['p50_ms'])} / {_n(kazoo['handoff']['p90_ms'])}",
                    f"{_n(ours['handoff']['p50_ms'])} / {_n(ours['handoff']['p90_ms'])}",
                    _x(run["ratios"]["ours_over_kazoo_lock_p50"]),
                    _pair(kazoo, ours, "requests_per_handoff"),
                    _pair(kazoo, ours, "notifications_per_release"),
                ]
            )
    header = [
        "waiters",
        "contenders",
        "kazoo ms (p50 / p90)",
        "ours ms (p50 / p90)",
        "ours/kazoo p50",
        "requests (kazoo / ours)",
        "notifications (kazoo / ours)",
    ]
    yield from _table(header, rows)
    for mode in ("threads", "processes"):
        section = doc.get(f"handoff_{mode}")
        if not section:
            continue
        block = section["waiters"]
        for impl, label in (("ours", "ours"), ("kazoo_lock", "kazoo's")):
            notes = sorted({v for v in _curve(block, impl, "notifications_per_release")[1]})
            yield (
                f"- {mode.capitalize()}, {label}: hand-off p50 "
                f"{_shape_of(block, impl, 'handoff', 'p50_ms', unit=' ms')}; requests per "
                f"hand-off {_shape_of(block, impl, 'requests_per_handoff')}; watch "
                f"notifications per release {' and '.join(f'{n:g}' for n in notes)} at every count."
            )
        for skipped in section.get("not_run", []):
            yield f"- {skipped['waiters']:,} waiters as processes: not run. {skipped['reason']}"
    yield ""
    yield (
        "Why: a release wakes one waiter, the next in line (one notification at every count, "
        "for both locks), so what a release costs the server does not depend on how many wait "
        "behind it: the delete, and the woken waiter's one listing of the children (ours lists "
        "nothing when the waiter was second in line: it knows it is next). Where latency grows, "
        "from 100 to 1,000 threads, the woken waiter lists 1,001 children in a process of "
        "1,000 waiting threads."
    )
    yield ""


def _scale_tree(doc: Doc) -> Lines:
    section = doc["tree"]
    yield "### TreeCache as the tree grows"
    yield ""
    yield from _image("tree", "TreeCache load time, memory and resync requests against nodes")
    rows = []
    for size, entry in sorted(section["sizes"].items(), key=lambda item: int(item[0])):
        cells = [f"{int(size):,}", f"{_n(entry['build']['seconds'], 1)}"]
        for impl in ("kazoo", "ours"):
            run = entry.get(impl, {})
            if "seconds" in run:
                cells.append(
                    f"{_n(run['seconds'])} s, {run['rss_added_bytes'] / 2**20:,.0f} MB, "
                    f"{run['resync_requests']:,}"
                )
            else:
                cells.append("not run" if "skipped" in run else "failed")
        rows.append(cells)
    header = [
        "leaves",
        "tree made in (s)",
        "kazoo: load, RSS added, resync requests",
        "ours: load, RSS added, resync requests",
    ]
    yield from _table(header, rows)
    sizes = section["sizes"]
    for impl, label in (("ours", "ours"), ("kazoo", "kazoo's")):
        yield (
            f"- {label.capitalize()}: load {_shape_of(sizes, impl, 'seconds', unit=' s')}; RSS "
            f"{_shape_of(sizes, impl, 'rss_added_bytes', unit=' MB', scale=2**-20)}; resync "
            f"requests {_shape_of(sizes, impl, 'resync_requests')}."
        )
    for skipped in section.get("not_run", []):
        yield f"- {skipped['nodes']:,} leaves, {skipped['who']}: {skipped['reason'].rstrip('.')}."
    largest = str(section["largest_ours"])
    if largest in sizes:
        build = sizes[largest]["build"]
        memory = section.get("server_memory_at_end") or {}
        heap = section.get("server_heap_max_mb")
        yield (
            f"- The largest tree, {int(largest):,} leaves ({build['server_znode_count']:,} "
            f"znodes on the server), was made in {_n(build['seconds'], 1)} s "
            f"({build['nodes_per_s']:,} leaves/s, a multi per directory); server heap limit "
            f"{heap or 512} MB"
            + (f", {memory['jvm_rss_mb']:,.0f} MB resident at the end" if memory else "")
            + "."
        )
    yield ""
    yield (
        "Why: both caches read each node once to load (kazoo's TreeCache twice: data and "
        "children), so load and memory grow with the tree. A resync is where they part: "
        "kazoo's re-reads the whole tree; ours asks the server what changed since the last "
        "zxid it saw (`setWatches2`, every cached path, 128 KB of paths per request) and reads "
        "only that, so past 10,000 nodes it too grows with the tree, by one request per about "
        "1,100 paths instead of two per node."
    )
    yield ""


def _scale_queue(doc: Doc) -> Lines:
    section = doc["queue"]
    yield "### Queue throughput as consumers grow"
    yield ""
    yield from _image("queue", "Queue items per second and requests per item against consumers")
    names = (
        ("ours", "ours, at most once"),
        ("ours_locked", "ours, lock-safe"),
        ("kazoo", "kazoo `Queue`"),
        ("kazoo_locking", "kazoo `LockingQueue`"),
    )
    block = section["consumers"]
    rows = [
        [
            label,
            *(
                f"{run['items_per_s']:,.0f} ({_n(run['requests_per_item'], 1)})"
                for run in (block[c][impl] for c in sorted(block, key=int))
            ),
        ]
        for impl, label in names
    ]
    header = [
        "items/s (requests/item)",
        *(f"{int(c):,} consumer{'s' if int(c) > 1 else ''}" for c in sorted(block, key=int)),
    ]
    yield (
        f"{section['producers']} producers put {section['items']:,} items; "
        f"{section['consumers_are']}."
    )
    yield ""
    yield from _table(header, rows)
    for impl, label in names:
        yield (
            f"- {label.capitalize() if label.startswith('ours') else label}: items/s "
            f"{_shape_of(block, impl, 'items_per_s')}; requests per item "
            f"{_shape_of(block, impl, 'requests_per_item')}."
        )
    yield ""
    most = max(block, key=int)
    done = block[most]["ours"]
    yield (
        "Why: more consumers do not take faster than the producers put. With "
        f"{int(most):,} consumers the last put returned at {_n(done['producers_done_s'])} s "
        f"and the last take at {_n(done['seconds'])} s: the queue is empty most of the "
        "time, the consumers race for each new item, and the requests per item rise with "
        "them; kazoo's LockingQueue, whose consumers each list and lock, rises and slows most."
    )
    yield ""


def _session_trouble(count: int, label: str, run: Doc) -> str:
    """A line for a count whose clients did not all start, lost touch, or would not close."""
    if "started" not in run:
        return f"- {count:,} {label}: no figure: {run['failed']}."
    began = f"- {count:,} {label}: {run['started']:,} started in {_n(run['connect_s'], 1)} s"
    if "server_pings_per_s" not in run:
        return f"{began}, then no idle window was measured: {run['failed']}."
    lost = {k: v for k, v in run["state_changes"].items() if "CONNECTED" not in k}
    if "failed" not in run and run["started"] == count and not lost:
        return ""
    cpu = run["idle_cpu_percent"]
    line = f"{began}; while idle the process used {cpu:g} % CPU (100 % is one core)"
    if lost:
        line += ", and clients lost touch with the server: " + ", ".join(
            f"{n:,} {state}" for state, n in sorted(lost.items())
        )
    if "failed" in run:
        line += "; closing them did not end within 300 s (the process did not answer)"
    return line + "."


def _scale_sessions(doc: Doc) -> Lines:
    section = doc["sessions"]
    yield "### Sessions as clients grow"
    yield ""
    yield from _image("sessions", "Threads, memory and pings per second against clients")
    block = section["counts"]
    rows = []
    for count in sorted(block, key=int):
        cells: list[list[str]] = []
        for impl in ("kazoo", "ours"):
            run = block[count][impl]
            if "started" not in run:
                cells.append(["failed"] * 4)
                continue
            started = "" if run["started"] == int(count) else f" ({run['started']:,} started)"
            cells.append(
                [
                    f"{run['threads_os']:,}{started}",
                    f"{run['rss_added_bytes'] / 2**20:,.1f}",
                    _n(run["server_pings_per_s"], 1) if "server_pings_per_s" in run else "-",
                    f"{run['idle_cpu_percent']:g}" if "idle_cpu_percent" in run else "-",
                ]
            )
        rows.append([f"{int(count):,}", *(f"{k} / {o}" for k, o in zip(*cells, strict=True))])
    yield (
        f"Idle clients in one process, {section['session_timeout_s']:g} s sessions; pings/s "
        f"as the server counts them over {section['window_s']:g} s."
    )
    yield ""
    header = ["clients", "threads", "RSS MB", "pings/s", "CPU % while idle"]
    yield from _table([header[0], *(f"{h} (kazoo / ours)" for h in header[1:])], rows)
    for impl, label in (("ours", "ours"), ("kazoo", "kazoo's")):
        calm = [
            c for c in sorted(block, key=int) if not _session_trouble(int(c), "", block[c][impl])
        ]
        largest = calm[-1]
        run = block[largest][impl]
        interval = (
            int(run["started"]) / run["server_pings_per_s"] if run["server_pings_per_s"] else 0
        )
        yield (
            f"- {label.capitalize()}: threads {_shape_of(block, impl, 'threads_os')} "
            f"({run['threads_per_client']:g} per client); RSS "
            f"{_shape_of(block, impl, 'rss_added_bytes', unit=' MB', scale=2**-20)}; pings/s "
            f"{_shape_of(block, impl, 'server_pings_per_s')} (one per client every "
            f"{interval:.1f} s at {int(largest):,}); CPU while idle "
            f"{_shape_of(block, impl, 'idle_cpu_percent', unit=' %')}."
        )
    for count in sorted(block, key=int):
        for impl, label in (("ours", "our ZkClients"), ("kazoo", "KazooClients")):
            line = _session_trouble(int(count), label, block[count][impl])
            if line:
                yield line
    yield ""
    calm = [
        c
        for c in block
        if not any(_session_trouble(int(c), "", block[c][impl]) for impl in ("ours", "kazoo"))
    ]
    if calm:
        count = max(calm, key=int)
        ours, kazoo = block[count]["ours"], block[count]["kazoo"]
        yield (
            "Why: threads and memory grow by a fixed amount per client (a ZkClient has kazoo's "
            "threads; one session watchdog thread serves every client of the process, each "
            "looked at when its next look falls due). An idle ZkClient proves its session with "
            "a sync every sixth of the timeout where kazoo pings every third (the proof the "
            "quorum heard it, where a ping may be answered by a server cut from it): more "
            f"requests, and the CPU they take; at {int(count):,} clients the idle process used "
            f"{ours['idle_cpu_percent']:g} % of a core against kazoo's "
            f"{kazoo['idle_cpu_percent']:g} %. Where upkeep outgrows the machine's cores, "
            "replies wait for the CPU and idle sessions are lost"
            + (" (above)." if len(calm) < len(block) else ".")
        )
        yield ""


def scale(path: Path, doc: Doc) -> Lines:
    yield from _heading("## Cost as work grows (`scale.py`)", path, doc)
    yield (
        "Each family from small to large, ours beside kazoo's, in one run on one server; "
        "drawn by `benchmarks/plot_scale.py`. A curve is called flat where a tenfold step "
        f"moves it by less than a log-log slope of {FLAT_SLOPE}, linear where the slope is "
        f"{LINEAR_SLOPES[0]} to {LINEAR_SLOPES[1]}. Curator is not drawn: "
        "`benchmarks/results/` holds a Curator figure only for the uncontended lock cycle "
        "(locks.py), none for any curve here."
    )
    yield ""
    if doc.get("handoff_threads") or doc.get("handoff_processes"):
        yield from _scale_handoff(doc)
    for name, renderer in (
        ("tree", _scale_tree),
        ("queue", _scale_queue),
        ("sessions", _scale_sessions),
    ):
        if doc.get(name):
            yield from renderer(doc)


def _load(path: Path) -> Doc:
    doc: Doc = json.loads(path.read_text())
    return doc


def render() -> str:
    """The page, from the newest run of each benchmark."""
    # Each renderer with the runs it reads: the first's path names the section's source.
    parts: list[tuple[Callable[..., Lines], tuple[str, ...]]] = [
        (locks, (r"locks-.*\.json",)),
        (leader, (r"leader-.*\.json",)),
        (caches, (r"caches-\d{4}-\d{2}-\d{2}\.json", r"caches-floor-.*\.json")),
        (queues, (r"queues-.*\.json",)),
        (aio_locks, (r"aio-locks-.*\.json",)),
        (celery_overhead, (r"celery-overhead-.*\.json",)),
        (celery_publish, (r"celery-publish-.*\.json",)),
        (chaos, (r"chaos-.*\.json",)),
    ]
    lines = [
        "# Latest figures",
        "",
        "<!-- Generated by benchmarks/figures.py from benchmarks/results/: do not edit. -->",
        "",
        "The newest full run of each benchmark, as recorded in `benchmarks/results/`.",
        "Every comparison was made in one run, on one server, side by side; absolute",
        "figures depend on the machine and its load (a shared 2-core machine here),",
        "ratios and request counts much less. What each figure means, and how to run",
        "the benchmarks yourself: [Benchmarks](benchmarks.md).",
        "",
    ]
    for renderer, patterns in parts:
        (path, doc), *others = [latest(pattern) for pattern in patterns]
        lines.extend(renderer(path, doc, *(other for _, other in others)))
    try:
        path, doc = latest(r"scale-.*\.json")
    except SystemExit:  # no full scale run recorded: the page has no such section
        pass
    else:
        lines.extend(scale(path, doc))
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE}", file=sys.stderr)
