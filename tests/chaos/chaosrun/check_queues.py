"""The queues' checker: every item put consumed once, fenced writes from the right claim only.

From the history: the producers' ``put`` events, the consumers' ``qstart``,
``qdone``, ``qfail`` and ``qlost`` (``queues.py``), the queues' fenced store
(``queue_writes``), the kills, and the end state the parent read
(``queue_final``: each result node with the delivery that committed it, the
dead letters, what was left).

Must be zero:

- ``items_lost``: an item whose put returned, that has no result node, is
  no dead letter and is not still queued.
- ``leftovers``: nodes left once every session ended: items still queued,
  claims, producers' markers (``<path>-puts``), corrupted nodes.
- ``commits_told_lost``: a result committed by a delivery whose queue said
  its claim *was* lost (not "may be": that one is said when the reply to the
  commit is lost, which may have applied).
- ``duplicates_unexplained``: a delivery of an item, other than the one that
  committed it, whose consumer was neither told its claim was (or may have
  been) lost nor killed after it began. Poison items are tried several times
  by design and are counted apart.
- ``dead_letters_unexpected``: a dead letter holding an item that is not
  poison (those consumers never raise).
- ``poison_not_dead_once``: a poison item put that is not exactly one dead
  letter after ``max_attempts`` attempts (or has a result).
- ``puts_failed_but_applied``: an item consumed although its put raised an
  error that says nothing was put (any error but ``TransactionOutcomeUnknown``).
- ``stale_writes_accepted``: an accepted store write whose token is not above
  every token accepted before it for that item (the store refuses those; this
  checks it). ``committed_not_fenced_last``: the committing delivery's store
  write is not the item's last accepted one (a write from another claim was
  accepted after it, or its own was refused).
- ``writes_after_newer_claim_unwarned``: a store write made after a newer
  claim of the same item was being worked on, by a consumer not told
  (``context.lost`` unset) and not frozen meanwhile: its client learnt of its
  session's end too late (the queue's analogue of ``locks.overlaps``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .history import Event, Fault, Pauses
from .queues import POISON
from .store import connect

_EXAMPLES = 5


@dataclasses.dataclass
class Delivery:
    id: str
    item: str
    worker: str
    pid: int
    token: int
    node: str
    start_ns: int
    done: bool = False
    failed: bool = False
    #: The queue's word on its claim: "definite", "maybe" or "".
    lost: str = ""
    suspended: bool = False


@dataclasses.dataclass(frozen=True)
class StoreWrite:
    item: str
    delivery: str
    pid: int
    token: int
    accepted: bool
    end_ns: int
    told_lost: bool


def _load(db_path: str | Path) -> tuple[list[StoreWrite], list[tuple[str, str, str, str]]]:
    conn = connect(db_path)
    try:
        writes = [
            StoreWrite(row[0], row[1], row[2], row[3], bool(row[4]), row[5], bool(row[6]))
            for row in conn.execute(
                "SELECT item, delivery, pid, token, accepted, end_ns, told_lost"
                " FROM queue_writes ORDER BY id"
            )
        ]
        final = list(conn.execute("SELECT kind, node, item, detail FROM queue_final ORDER BY id"))
    finally:
        conn.close()
    return writes, final


def check_queues(
    db_path: str | Path,
    events: list[Event],
    faults: list[Fault],
    pauses: Pauses,
    *,
    max_attempts: int,
) -> dict[str, Any]:
    writes, final = _load(db_path)
    puts: dict[str, str] = {}  # item -> outcome of its put
    put_calls: Counter[str] = Counter()
    errors_raised_at: Counter[str] = Counter()  # the put's error and where it was raised
    multi = 0
    deliveries: dict[str, Delivery] = {}
    unmatched_reports = 0
    for event in events:
        if event.kind == "put":
            outcome, _, ids = event.detail.partition(" ")
            put_calls[outcome.split("@")[0]] += 1
            if outcome.startswith("error"):
                errors_raised_at[outcome] += 1
            items = ids.split(",")
            multi += len(items) > 1
            for item in items:
                puts[item] = outcome
        elif event.kind == "qstart":
            delivery, node, _attempt = event.detail.split(" ")
            deliveries[delivery] = Delivery(
                delivery,
                event.path,
                delivery.split("/")[0],
                event.pid,
                event.token or 0,
                node,
                event.t_ns,
            )
        elif event.kind in ("qdone", "qfail", "qlost"):
            delivery, _, rest = event.detail.partition(" ")
            found = deliveries.get(delivery)
            if found is None:
                unmatched_reports += event.kind == "qlost"
            elif event.kind == "qdone":
                found.done = True
                found.suspended = rest.split(" ")[-1] == "1"
            elif event.kind == "qfail":
                found.failed = True
            else:
                found.lost = "definite" if "definite" in rest or found.lost == "definite" else rest

    results: dict[str, str] = {}
    dead: dict[str, list[int]] = defaultdict(list)
    left: set[str] = set()
    leftover_nodes: list[str] = []
    for kind, node, item, detail in final:
        if kind == "result":
            results[item] = detail
        elif kind == "dead":
            dead[item].append(int(detail))
        elif kind == "left":
            left.add(item)
            leftover_nodes.append(f"{node} {item}")
        else:  # claim, marker, corrupted
            leftover_nodes.append(node)

    ok = {item for item, outcome in puts.items() if outcome == "ok"}
    ended = results.keys() | dead.keys() | left
    lost = sorted(item for item in ok if item not in ended)
    poison_ok = {item for item in ok if item.endswith(POISON)}
    poison_bad = sorted(
        item
        for item in poison_ok
        if item not in left and (dead.get(item, []) != [max_attempts] or item in results)
    )
    killed: dict[str, int] = {f.target: f.begin_ns for f in faults if f.kind == "kill_worker"}

    by_item: dict[str, list[Delivery]] = defaultdict(list)
    for each in deliveries.values():
        by_item[each.item].append(each)
    told_lost_dup = killed_dup = duplicated_items = 0
    unexplained: list[str] = []
    for item, of_item in by_item.items():
        if item.endswith(POISON):
            continue
        duplicated_items += len(of_item) > 1
        if len(of_item) == 1 and item not in results:
            continue  # never committed: lost or left, counted there
        for each in of_item:
            if each.id == results.get(item):
                continue
            if each.lost:
                told_lost_dup += 1
            elif killed.get(each.worker, -1) >= each.start_ns:
                killed_dup += 1
            else:
                unexplained.append(_describe(each, results.get(item)))
    committed_lost = [
        item
        for item, committer in results.items()
        if committer in deliveries and deliveries[committer].lost == "definite"
    ]

    stale = superseded = refused_told = 0
    not_last: list[str] = []
    accepted_by_item: dict[str, list[StoreWrite]] = defaultdict(list)
    for write in writes:  # commit order
        if not write.accepted:
            refused_told += write.told_lost
            continue
        previous = accepted_by_item[write.item]
        if previous and write.token <= max(w.token for w in previous):
            stale += 1
        previous.append(write)
    for item, committer in results.items():
        accepted = accepted_by_item.get(item, [])
        if not accepted or accepted[-1].delivery != committer:
            not_last.append(item)
        own = [w.token for w in accepted if w.delivery == committer]
        if own:  # accepted from older claims before the committing one wrote: overruled
            superseded += sum(1 for w in accepted if w.token < own[0])

    unwarned: list[str] = []
    for write in writes:
        writer = deliveries.get(write.delivery)
        if writer is None or write.told_lost:
            continue
        newer = [
            d
            for d in by_item.get(write.item, [])
            if d.token > write.token and d.start_ns < write.end_ns
        ]
        if newer and not pauses.during(write.pid, writer.start_ns, write.end_ns):
            unwarned.append(
                f"{_describe(writer, results.get(write.item))} wrote after {newer[0].id} began"
            )

    applied_after_error = sorted(
        item for item in results if puts.get(item, "ok").startswith("error")
    )
    return {
        "items_lost": len(lost),
        "items_lost_examples": lost[:_EXAMPLES],
        "leftovers": len(leftover_nodes),
        "leftover_nodes": leftover_nodes[:20],
        "commits_told_lost": len(committed_lost),
        "commits_told_lost_examples": committed_lost[:_EXAMPLES],
        "duplicates_unexplained": len(unexplained),
        "duplicates_unexplained_examples": unexplained[:_EXAMPLES],
        "dead_letters_unexpected": sum(1 for item in dead if not item.endswith(POISON)),
        "poison_not_dead_once": len(poison_bad),
        "poison_not_dead_once_examples": poison_bad[:_EXAMPLES],
        "puts_failed_but_applied": len(applied_after_error),
        "puts_failed_but_applied_examples": [
            f"{item}: {puts[item]}" for item in applied_after_error[:_EXAMPLES]
        ],
        "stale_writes_accepted": stale,
        "committed_not_fenced_last": len(not_last),
        "committed_not_fenced_last_examples": not_last[:_EXAMPLES],
        "writes_after_newer_claim_unwarned": len(unwarned),
        "writes_after_newer_claim_unwarned_examples": unwarned[:_EXAMPLES],
        # At work:
        "puts": dict(sorted(put_calls.items())),
        "put_errors_raised_at": dict(sorted(errors_raised_at.items())),
        "put_multi_nodes": multi,
        "items_put": len(ok),
        "items_put_unknown": sum(1 for o in puts.values() if o == "unknown"),
        "items_consumed": len(results),
        "consumed_after_unknown_put": sum(1 for i in results if puts.get(i) == "unknown"),
        "consumed_put_unrecorded": sum(1 for i in results if i not in puts),
        "deliveries": len(deliveries),
        "items_delivered_twice_or_more": duplicated_items,
        "duplicates_told_lost": told_lost_dup,
        "duplicates_killed": killed_dup,
        "loss_reports": dict(Counter(d.lost for d in deliveries.values() if d.lost)),
        "loss_reports_unmatched": unmatched_reports,
        "deliveries_suspended": sum(1 for d in deliveries.values() if d.suspended),
        "committed_after_suspended": sum(
            1 for d in results.values() if d in deliveries and deliveries[d].suspended
        ),
        "store_writes": len(writes),
        "store_writes_refused": sum(1 for w in writes if not w.accepted),
        "store_writes_refused_told_lost": refused_told,
        "store_writes_superseded": superseded,
        "poison_items": len(poison_ok),
        "poison_deliveries": sum(1 for d in deliveries.values() if d.failed),
        "dead_letters": sum(len(v) for v in dead.values()),
    }


def _describe(delivery: Delivery, committed: str | None) -> str:
    return (
        f"{delivery.item}: {delivery.id} pid={delivery.pid} token={delivery.token} "
        f"start={delivery.start_ns} done={delivery.done} failed={delivery.failed} "
        f"lost={delivery.lost or '-'}; committed by {committed}"
    )
