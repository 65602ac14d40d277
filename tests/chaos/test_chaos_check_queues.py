"""The queues' checker flags what it must, on hand-made histories (no ZooKeeper needed).

Each history holds one violation (or one case the checker must let pass);
see ``chaosrun/check_queues.py`` for what each figure means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .chaosrun.check import check
from .histories import PATHS, event, fault, final, history, pause, store_write

W0, W1 = ("w0.1", 10), ("w1.1", 11)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return history(tmp_path)


def _queues(db: Path) -> dict[str, Any]:
    figures: dict[str, Any] = check(db, PATHS, families=("queues",), max_attempts=3)["queues"]
    return figures


def _put(db: Path, *items: str, outcome: str = "ok", t: float = 0.5) -> None:
    event(db, *W0, "put", t, path="/queues/fast", detail=f"{outcome} {','.join(items)}")


def _deliver(
    db: Path,
    who: tuple[str, int],
    item: str,
    number: int,
    token: int,
    start: float,
    *,
    commit: bool = False,
    lost: str = "",
) -> str:
    """A delivery that worked and wrote to the store; ``commit``: its result node exists."""
    delivery = f"{who[0]}/{number}"
    node = "/queues/fast/queue-0000000001"
    event(db, *who, "qstart", start, path=item, token=token, detail=f"{delivery} {node} 1")
    store_write(db, item, delivery, token, start + 0.5, pid=who[1])
    event(db, *who, "qdone", start + 0.6, path=item, detail=f"{delivery} 1 0")
    if lost:
        event(db, *who, "qlost", start + 0.7, path=item, detail=f"{delivery} {lost}")
    if commit:
        final(db, "result", f"/queues/results/{item}", item, delivery)
    return delivery


def _poison(db: Path, item: str, attempts: int = 3) -> None:
    _put(db, item)
    for number in range(attempts):
        delivery = f"w1.1/{90 + number}"
        node = "/queues/fast/queue-0000000009"
        event(db, *W1, "qstart", 1.0 + number, path=item, token=900, detail=f"{delivery} {node} 1")
        event(db, *W1, "qfail", 1.0 + number, path=item, detail=delivery)


def _must_be_zero(figures: dict[str, Any]) -> dict[str, int]:
    names = (
        "items_lost",
        "leftovers",
        "commits_told_lost",
        "duplicates_unexplained",
        "dead_letters_unexpected",
        "poison_not_dead_once",
        "puts_failed_but_applied",
        "stale_writes_accepted",
        "committed_not_fenced_last",
        "writes_after_newer_claim_unwarned",
    )
    return {name: figures[name] for name in names if figures[name]}


def test_a_clean_history_has_nothing_to_report(db: Path) -> None:
    _put(db, "w0.1-1", "w0.1-2")  # a put_multi node
    _deliver(db, W1, "w0.1-1", 1, 100, 1.0, commit=True)
    _deliver(db, W1, "w0.1-2", 2, 100, 1.0, commit=True)
    _poison(db, "w0.1-3-poison")
    final(db, "dead", "/queues/fast-dead/queue-0000000009", "w0.1-3-poison", "3")
    _put(db, "w0.1-4", outcome="unknown")  # not put after all: not lost
    figures = _queues(db)
    assert _must_be_zero(figures) == {}
    assert figures["items_put"] == 3
    assert figures["items_consumed"] == 2
    assert figures["put_multi_nodes"] == 1
    assert figures["poison_items"] == figures["dead_letters"] == 1
    assert figures["poison_deliveries"] == 3


def test_an_item_put_and_never_consumed_is_lost(db: Path) -> None:
    _put(db, "w0.1-1", "w0.1-2")
    _deliver(db, W1, "w0.1-1", 1, 100, 1.0, commit=True)
    figures = _queues(db)
    assert figures["items_lost"] == 1
    assert figures["items_lost_examples"] == ["w0.1-2"]


def test_what_is_left_once_sessions_ended_is_a_leftover_not_a_loss(db: Path) -> None:
    _put(db, "w0.1-1")
    final(db, "left", "/queues/fast", "w0.1-1")
    final(db, "claim", "/queues/fast-claims/queue-0000000001")
    final(db, "marker", "/queues/fast-puts/_c_1234-put0000000007")
    figures = _queues(db)
    assert figures["items_lost"] == 0
    assert figures["leftovers"] == 3


def test_a_commit_by_a_consumer_told_its_claim_was_lost_is_counted(db: Path) -> None:
    _put(db, "w0.1-1", "w0.1-2")
    _deliver(db, W1, "w0.1-1", 1, 100, 1.0, commit=True, lost="definite")
    # "may be lost": the reply to the commit was lost, and the commit may have applied.
    _deliver(db, W1, "w0.1-2", 2, 200, 3.0, commit=True, lost="maybe")
    figures = _queues(db)
    assert figures["commits_told_lost"] == 1
    assert figures["commits_told_lost_examples"] == ["w0.1-1"]


def test_a_second_delivery_is_explained_only_by_a_loss_report_or_a_kill(db: Path) -> None:
    _put(db, "w0.1-1", "w0.1-2", "w0.1-3")
    _deliver(db, W0, "w0.1-1", 1, 100, 1.0)  # nobody told it anything
    _deliver(db, W1, "w0.1-1", 1, 200, 2.0, commit=True)
    _deliver(db, W0, "w0.1-2", 2, 110, 1.0, lost="maybe")
    _deliver(db, W1, "w0.1-2", 2, 210, 2.0, commit=True)
    _deliver(db, ("w2.1", 12), "w0.1-3", 1, 120, 1.0)
    fault(db, "kill_worker", "w2.1", 12, 1.2, 1.3)  # killed mid-item
    _deliver(db, W1, "w0.1-3", 3, 220, 2.0, commit=True)
    figures = _queues(db)
    assert figures["duplicates_unexplained"] == 1
    assert "w0.1-1: w0.1/1" in figures["duplicates_unexplained_examples"][0]
    assert figures["duplicates_told_lost"] == 1
    assert figures["duplicates_killed"] == 1
    assert figures["items_delivered_twice_or_more"] == 3


def test_a_dead_letter_of_an_item_that_is_no_poison_is_counted(db: Path) -> None:
    _put(db, "w0.1-1")
    final(db, "dead", "/queues/fast-dead/queue-0000000001", "w0.1-1", "3")
    figures = _queues(db)
    assert figures["dead_letters_unexpected"] == 1
    assert figures["items_lost"] == 0


@pytest.mark.parametrize(
    "letters",
    [[], ["3", "3"], ["2"]],
    ids=["not dead", "dead twice", "dead too early"],
)
def test_a_poison_item_must_be_one_dead_letter_after_max_attempts(
    db: Path, letters: list[str]
) -> None:
    _poison(db, "w0.1-1-poison")
    for letter in letters:
        final(db, "dead", "/queues/fast-dead/queue-0000000009", "w0.1-1-poison", letter)
    assert _queues(db)["poison_not_dead_once"] == 1


def test_an_item_consumed_although_its_put_raised_is_counted(db: Path) -> None:
    _put(db, "w0.1-1", outcome="error:ConnectionLostError")
    _deliver(db, W1, "w0.1-1", 1, 100, 1.0, commit=True)
    _put(db, "w0.1-2", outcome="unknown")  # may have been put: fine either way
    _deliver(db, W1, "w0.1-2", 2, 200, 1.0, commit=True)
    figures = _queues(db)
    assert figures["puts_failed_but_applied"] == 1
    assert figures["consumed_after_unknown_put"] == 1


def test_an_accepted_store_write_below_an_accepted_token_is_counted(db: Path) -> None:
    store_write(db, "w0.1-1", "w1.1/1", 200, 1.0)
    store_write(db, "w0.1-1", "w0.1/1", 100, 2.0)  # accepted: a broken store
    store_write(db, "w0.1-2", "w0.1/2", 50, 2.5)  # another item: its own fence
    assert _queues(db)["stale_writes_accepted"] == 1


def test_the_committing_delivery_must_be_the_last_accepted_store_write(db: Path) -> None:
    _put(db, "w0.1-1")
    _deliver(db, W0, "w0.1-1", 1, 100, 1.0, commit=True, lost="maybe")
    store_write(db, "w0.1-1", "w1.1/1", 200, 3.0)  # a newer claim wrote after the commit
    figures = _queues(db)
    assert figures["committed_not_fenced_last"] == 1
    assert figures["store_writes_superseded"] == 0


def test_a_stale_consumer_writing_unwarned_after_a_newer_claim_began_is_counted(
    db: Path,
) -> None:
    _put(db, "w0.1-1", "w0.1-2", "w0.1-3")
    stale = [("w0.1", 10), ("w0.1", 10), ("w2.1", 12)]
    for number, item in enumerate(("w0.1-1", "w0.1-2", "w0.1-3")):
        worker, pid = stale[number]
        delivery = f"{worker}/{number}"
        token = 100 + number
        event(db, worker, pid, "qstart", 1.0, path=item, token=token, detail=f"{delivery} /q 1")
        # Written at 3.0, after the newer claim began at 2.6 and before it wrote (3.1):
        # unwarned, told lost (context.lost set), frozen meanwhile.
        store_write(db, item, delivery, token, 3.0, told_lost=number == 1, pid=pid)
        _deliver(db, W1, item, number, 200 + number, 2.6, commit=True)
    pause(db, "w2.1", 12, 1.5, 2.8)
    figures = _queues(db)
    assert figures["writes_after_newer_claim_unwarned"] == 1
    assert "w0.1-1: w0.1/0" in figures["writes_after_newer_claim_unwarned_examples"][0]
    assert figures["store_writes_superseded"] == 3  # accepted, overruled by the newer token
    assert figures["committed_not_fenced_last"] == 0
