"""The discovery checker flags what it must, on hand-made histories (no ZooKeeper needed).

Sessions of 2.5 s, so a node may outlive its end by ``BOUND`` (4.55 s: 1.66
session timeouts and two ticks); see ``chaosrun/check_discovery.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .chaosrun.check import check
from .histories import PATHS, event, fault, history, pause, snapshot

W0 = ("w0.1", 10)
BOUND = 2.5 * 1.66 + 0.4
OWNER = 0x100


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = history(tmp_path)
    event(path, *W0, "state", 0.5, detail="CONNECTED", token=OWNER)
    return path


def _discovery(db: Path) -> dict[str, Any]:
    figures: dict[str, Any] = check(
        db, PATHS, families=("discovery",), ghost_bound=BOUND, session_timeout=2.5
    )["discovery"]
    return figures


def _register(db: Path, key: str, t: float, kind: str = "DYNAMIC") -> None:
    event(db, *W0, "sd_reg", t, path=key, detail=kind)
    event(db, *W0, "sd_reg_ok", t + 0.1, path=key)


def _zeros(figures: dict[str, Any]) -> dict[str, int]:
    return {k: figures[k] for k in ("ghosts", "absences", "duplicates") if figures[k]}


def test_a_clean_history_has_nothing_to_report(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    snapshot(db, 0.9, 1.0, [])  # before the registration
    snapshot(db, 2.0, 2.1, [("w0.1-d0", OWNER)])
    event(db, *W0, "sd_unreg", 5.0, path="w0.1-d0")
    snapshot(db, 5.5, 5.6, [("w0.1-d0", OWNER)])  # its delete still under way: fine
    snapshot(db, 7.0, 7.1, [])
    _register(db, "w0.1-d0", 8.0)  # flapped: the same id again
    snapshot(db, 9.0, 9.1, [("w0.1-d0", OWNER)])
    figures = _discovery(db)
    assert _zeros(figures) == {}
    assert figures["instances"] == 1
    assert figures["registrations"] == {"DYNAMIC": 2}
    assert figures["visible_after_release_max_s"] == 0.5


def test_an_instance_seen_past_the_bound_after_its_unregister_is_a_ghost(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    event(db, *W0, "sd_unreg", 2.0, path="w0.1-d0")
    snapshot(db, 2.0 + BOUND + 0.1, 2.0 + BOUND + 0.2, [("w0.1-d0", OWNER)])
    figures = _discovery(db)
    assert figures["ghosts"] == 1


def test_a_server_fault_gives_sessions_a_fresh_timeout(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    event(db, *W0, "sd_unreg", 2.0, path="w0.1-d0")
    fault(db, "kill_leader", "server.1", None, 3.0, 4.0)
    snapshot(db, 2.0 + BOUND + 0.1, 2.0 + BOUND + 0.2, [("w0.1-d0", OWNER)])  # exempt
    snapshot(db, 4.0 + BOUND + 0.1, 4.0 + BOUND + 0.2, [("w0.1-d0", OWNER)])  # not
    figures = _discovery(db)
    assert figures["ghosts"] == 1
    assert figures["ghosts_exempt_server_fault"] == 1


def test_a_killed_workers_instances_must_go_within_the_bound(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    fault(db, "kill_worker", "w0.1", 10, 3.0, 3.1)
    snapshot(db, 3.0 + BOUND - 0.5, 3.0 + BOUND - 0.4, [("w0.1-d0", OWNER)])
    assert _discovery(db)["ghosts"] == 0
    # An unrecorded registration (the kill took the event with it) counts the same.
    snapshot(db, 3.0 + BOUND + 0.1, 3.0 + BOUND + 0.2, [("w0.1-d7", OWNER)])
    assert _discovery(db)["ghosts"] == 1


def test_an_instance_never_registered_by_a_live_worker_is_a_ghost(db: Path) -> None:
    snapshot(db, 1.0, 1.1, [("w3.1-d0", 0x300)])
    assert _discovery(db)["ghosts"] == 1


def test_a_held_instance_missing_past_the_session_timeout_is_an_absence(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    snapshot(db, 2.0, 2.1, [])  # 0.9 s after it was registered: not yet
    snapshot(db, 4.0, 4.1, [])  # 2.9 s: an absence
    figures = _discovery(db)
    assert figures["absences"] == 1
    assert figures["absent_while_held_max_s"] == 2.9


def test_a_worker_not_connected_or_frozen_is_not_held_to_it(db: Path) -> None:
    _register(db, "w0.1-d0", 1.0)
    _register(db, "w0.1-s1", 1.0, "DYNAMIC_SEQUENTIAL")
    event(db, *W0, "state", 3.0, detail="SUSPENDED", token=OWNER)
    event(db, *W0, "state", 5.0, detail="CONNECTED", token=OWNER + 1)  # a new session
    # Connected again for 1.5 s: re-registration under way.
    snapshot(db, 6.5, 6.6, [("w0.1-s10000000001", OWNER)])
    pause(db, "w0.1", 10, 7.0, 9.0)
    snapshot(db, 9.5, 9.6, [])  # connected since 5.0, but frozen meanwhile
    figures = _discovery(db)
    assert figures["absences"] == 0
    assert figures["absences_exempt_paused"] == 2


def test_a_sequential_registration_made_twice_is_a_duplicate(db: Path) -> None:
    _register(db, "w0.1-s1", 1.0, "DYNAMIC_SEQUENTIAL")
    _register(db, "w0.1-s2", 1.0, "DYNAMIC_SEQUENTIAL")
    two_of_one_session = [("w0.1-s10000000001", OWNER), ("w0.1-s10000000002", OWNER)]
    snapshot(db, 2.0, 2.1, two_of_one_session)
    # Another session's node beside the new one: fine for a while, then a duplicate.
    snapshot(db, 2.0, 2.1, [("w0.1-s20000000003", OWNER), ("w0.1-s20000000004", OWNER + 1)])
    snapshot(db, 2.0 + BOUND, 2.1 + BOUND, [("w0.1-s20000000003", OWNER)])
    figures = _discovery(db)
    assert figures["duplicates"] == 1
    assert "one session" in figures["duplicate_examples"][0]
    snapshot(
        db,
        2.2 + BOUND,
        2.3 + BOUND,
        [("w0.1-s20000000003", OWNER), ("w0.1-s20000000004", OWNER + 1)],
    )
    assert _discovery(db)["duplicates"] == 2
