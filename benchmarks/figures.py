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

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "figures.md"

Doc = dict[str, Any]
Lines = Iterator[str]


def latest(pattern: str) -> tuple[Path, Doc]:
    """The newest full run among the results whose name matches ``pattern``, and its document."""
    runs = [
        (path, doc)
        for path in RESULTS.glob("*.json")
        if re.fullmatch(pattern, path.name) and not _quick(doc := _load(path))
    ]
    if not runs:
        raise SystemExit(f"no full run in {RESULTS} matches {pattern}")

    def order(run: tuple[Path, Doc]) -> tuple[str, str]:
        path, doc = run
        date = re.search(r"(\d{4}-\d{2}-\d{2})", path.name)
        return (date.group(1) if date else "", str(doc.get("meta", {}).get("started_at", "")))

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


def caches(path: Path, doc: Doc, churn: Doc) -> Lines:
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
    nodes = churn["churn"]
    rows.append(
        [
            "a child created and deleted",
            "",
            "",
            f"{_n(nodes['kazoo']['requests_per_create_and_delete_median'], 1)} / "
            f"{_n(nodes['ours']['requests_per_create_and_delete_median'], 1)}",
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


def _load(path: Path) -> Doc:
    doc: Doc = json.loads(path.read_text())
    return doc


def render() -> str:
    """The page, from the newest run of each benchmark."""
    # Each renderer with the runs it reads: the first's path names the section's source.
    parts: list[tuple[Callable[..., Lines], tuple[str, ...]]] = [
        (locks, (r"locks-.*\.json",)),
        (leader, (r"leader-.*\.json",)),
        (caches, (r"caches-\d{4}-\d{2}-\d{2}\.json", r"caches-churn-.*\.json")),
        (queues, (r"queues-.*\.json",)),
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
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE}", file=sys.stderr)
