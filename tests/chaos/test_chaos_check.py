"""The chaos checker flags what it must, on hand-made histories (no ZooKeeper needed).

A checker that never fires proves nothing; these histories each hold one
violation (or one exempt case) and the figures must say so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .chaosrun.check import check
from .chaosrun.store import connect, table_for
from .histories import PATHS, S, event, fault, history, pause


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return history(tmp_path)


def _section(
    db: Path,
    worker: str,
    pid: int,
    token: int,
    start: float,
    end: float,
    *,
    path: str = "/locks/a",
    accepted: bool = True,
    told_lost: bool = False,
) -> None:
    conn = connect(db)
    try:
        conn.execute(
            f"INSERT INTO {table_for(path)} (worker, pid, token, accepted, call_ns, start_ns,"
            " end_ns, told_lost) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                worker,
                pid,
                token,
                int(accepted),
                int(start * S),
                int(start * S),
                int(end * S),
                int(told_lost),
            ),
        )
    finally:
        conn.close()


def test_a_clean_history_has_nothing_to_report(db: Path) -> None:
    _section(db, "w0", 10, 100, 1.0, 2.0)
    _section(db, "w1", 11, 200, 2.5, 3.0)
    _section(db, "w1", 11, 300, 1.0, 5.0, path="/locks/b")  # other path: no overlap
    report = check(db, PATHS)
    assert report["acquisitions"] == 3
    locks = report["locks"]
    assert locks["overlaps"] == locks["stale_writes_accepted"] == 0
    assert locks["stale_writes_refused"] == 0


def test_overlapping_holders_are_counted(db: Path) -> None:
    _section(db, "w0", 10, 100, 1.0, 3.0)
    _section(db, "w1", 11, 200, 2.0, 4.0)
    locks = check(db, PATHS)["locks"]
    assert locks["overlaps"] == 1
    assert len(locks["overlap_examples"]) == 1


def test_a_holder_told_lost_before_the_next_one_starts_does_not_overlap(db: Path) -> None:
    _section(db, "w0", 10, 100, 1.0, 3.0, accepted=False, told_lost=True)
    event(db, "w0", 10, "lost", 1.5, path="/locks/a", token=100)
    _section(db, "w1", 11, 200, 2.0, 2.5)
    locks = check(db, PATHS)["locks"]
    assert locks["overlaps"] == 0
    assert locks["lost_before_next_holder"] == 1
    assert locks["refused_told_lost"] == 1


def test_a_late_notification_is_counted_unless_the_process_was_paused(db: Path) -> None:
    _section(db, "w0", 10, 100, 1.0, 1.2)
    event(db, "w0", 10, "lost", 2.5, path="/locks/a", token=100)
    _section(db, "w1", 11, 200, 2.0, 2.2)
    _section(db, "w2", 12, 300, 3.0, 3.2)
    event(db, "w2", 12, "lost", 5.5, path="/locks/a", token=300)
    pause(db, "w2", 12, 3.5, 5.0)
    _section(db, "w3", 13, 400, 4.0, 4.2)
    locks = check(db, PATHS)["locks"]
    assert locks["lost_after_next_holder"] == 1
    assert locks["lost_after_next_holder_paused"] == 1


def test_a_paused_holder_overlap_is_exempt_and_its_refused_write_explained(db: Path) -> None:
    _section(db, "w0", 10, 100, 1.0, 6.0, accepted=False)
    pause(db, "w0", 10, 1.5, 5.9)
    _section(db, "w1", 11, 200, 4.0, 4.5)
    locks = check(db, PATHS)["locks"]
    assert locks["overlaps"] == 0
    assert locks["overlaps_paused_exempt"] == 1
    assert locks["refused_paused"] == 1
    assert locks["refused_unexplained"] == 0


def test_an_accepted_stale_token_is_counted(db: Path) -> None:
    _section(db, "w0", 10, 200, 1.0, 1.5)
    _section(db, "w1", 11, 100, 2.0, 2.5)  # accepted although 100 < 200: a broken store
    assert check(db, PATHS)["locks"]["stale_writes_accepted"] == 1


def test_two_leaders_at_once_are_counted_and_a_paused_one_is_exempt(db: Path) -> None:
    event(db, "w0", 10, "leader", 1.0)
    event(db, "w0", 10, "not_leader", 3.0)
    event(db, "w1", 11, "leader", 2.0)
    event(db, "w1", 11, "not_leader", 2.5)
    event(db, "w2", 12, "leader", 4.0)
    pause(db, "w2", 12, 4.5, 8.0)
    event(db, "w2", 12, "not_leader", 8.1)
    event(db, "w3", 13, "leader", 7.0)
    event(db, "w3", 13, "closing", 9.0)
    leadership = check(db, PATHS)["leadership"]
    assert leadership["terms"] == 4
    assert leadership["overlaps"] == 1
    assert leadership["overlaps_paused_exempt"] == 1


def test_overlapping_faults_are_paired_by_kind(db: Path) -> None:
    fault(db, "drop_requests_worker", "w0", 10, 1.0, 5.0)
    fault(db, "kill_leader", "server.2", None, 1.5, 4.0)  # inside the partition
    fault(db, "pause_worker", "w1", 11, 6.0, 10.0)
    fault(db, "restart_server", "server.1", None, 9.0, 12.0)  # starts before the pause ends
    fault(db, "kill_worker", "w2", 12, 12.5, 12.6)  # alone
    report = check(db, PATHS)
    assert report["faults_overlapping"] == {
        "drop_requests_worker+kill_leader": 1,
        "pause_worker+restart_server": 1,
    }
    assert report["faults"]["kill_worker"] == 1


def test_partitions_report_what_their_targets_heard_and_when_they_were_told_lost(
    db: Path,
) -> None:
    # A one-way cut that lets the server's notifications through: heard, told LOST late.
    fault(db, "drop_requests_worker", "w0", 10, 1.0, 5.5)
    for t in (0.5, 1.4, 1.9, 2.4):  # the first one came before the cut
        event(db, "w0", 10, "notified", t, path="/churn/n00")
    event(db, "w0", 10, "state", 2.0, detail="SUSPENDED")
    event(db, "w0", 10, "state", 5.0, detail="LOST")
    event(db, "w1", 11, "notified", 2.0, path="/churn/n00")  # someone else
    # A partition both ways: nothing heard, told LOST in time.
    fault(db, "partition_worker", "w1", 11, 6.0, 10.0)
    event(db, "w1", 11, "state", 7.75, detail="LOST")
    # Healed before any LOST.
    fault(db, "partition_worker", "w2", 12, 11.0, 12.0)
    event(db, "w2", 12, "state", 12.5, detail="LOST")
    report = check(db, PATHS)
    assert report["churn_notifications"] == 5
    assert report["partitions"] == {
        "drop_requests_worker": {
            "faults": 1,
            "notifications": 3,
            "heard_notifications": 1,
            "told_lost_after_s": [4.0],
            "not_told_lost": 0,
        },
        "partition_worker": {
            "faults": 2,
            "notifications": 0,
            "heard_notifications": 0,
            "told_lost_after_s": [1.75],
            "not_told_lost": 1,
        },
    }
