"""Importing zk_recipes_celery changes nothing in Celery; every door installs the hooks once.

Each case runs in a fresh interpreter: what this test process has imported or
installed already must not decide the outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: Prints what the hooks look like before and after importing us, then after DOOR:
#: how many receivers each of Celery's signals has, and whether beat's methods are
#: Celery's own or wrapped (once, or twice).
SCRIPT = textwrap.dedent(
    """
    import json

    import celery.app.task
    import celery.beat
    import celery.signals
    from celery.utils.dispatch import Signal

    SIGNALS = {n: s for n, s in vars(celery.signals).items() if isinstance(s, Signal)}
    APPLY_ENTRY = celery.beat.Scheduler.apply_entry
    IS_DUE = celery.beat.Scheduler.is_due
    SYNC = celery.beat.Service.sync
    APPLY_ASYNC = celery.app.task.Task.apply_async


    def snapshot():
        return {
            "receivers": {n: len(s.receivers) for n, s in SIGNALS.items() if s.receivers},
            "apply_entry": "original" if celery.beat.Scheduler.apply_entry is APPLY_ENTRY
            else "wrapped once" if celery.beat.Scheduler.apply_entry.__wrapped__ is APPLY_ENTRY
            else "wrapped twice",
            "is_due": "original" if celery.beat.Scheduler.is_due is IS_DUE
            else "wrapped once" if celery.beat.Scheduler.is_due.__wrapped__ is IS_DUE
            else "wrapped twice",
            "sync": "original" if celery.beat.Service.sync is SYNC
            else "wrapped once" if celery.beat.Service.sync.__wrapped__ is SYNC
            else "wrapped twice",
            "apply_async": "original" if celery.app.task.Task.apply_async is APPLY_ASYNC
            else "wrapped once" if celery.app.task.Task.apply_async.__wrapped__ is APPLY_ASYNC
            else "wrapped twice",
        }


    before = snapshot()
    import zk_recipes_celery
    import zk_recipes_celery.beat
    import zk_recipes_celery.testing
    import zk_recipes_celery.testing.pytest_plugin
    imported = snapshot()
    DOOR
    once = snapshot()
    zk_recipes_celery.install(celery.Celery("again", set_as_current=False))
    twice = snapshot()
    print(json.dumps({"before": before, "imported": imported, "once": once, "twice": twice}))
    """
)

#: What a user can write first; each must install the hooks.
DOORS = {
    "install(app)": "zk_recipes_celery.install(celery.Celery('p', set_as_current=False))",
    "@singleton_task": "zk_recipes_celery.singleton_task(lambda: None)",
    "@singleton_task(...)": "zk_recipes_celery.singleton_task(on_conflict='wait')(lambda: None)",
    "SingletonTask": "type('T', (zk_recipes_celery.SingletonTask,), {})",
    "@leader_only": "zk_recipes_celery.leader_only(lambda: None)",
    "leader_gated": "zk_recipes_celery.leader_gated(celery.beat.PersistentScheduler)",
    "get_client()": (
        "import zk_recipes\n"
        "try:\n"
        "    zk_recipes_celery.get_client(celery.Celery('p', set_as_current=False))\n"
        "except zk_recipes.ConfigurationError:\n"
        "    pass  # no hosts configured: the hooks are in anyway"
    ),
}
HOOKED = {
    "celeryd_init": 1,
    "worker_process_init": 1,
    "worker_process_shutdown": 1,
    "worker_shutdown": 1,
    "beat_init": 1,
    "task_revoked": 1,
}


def _run(door: str) -> dict[str, dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("DOOR", door)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_the_package_changes_nothing_in_celery() -> None:
    outcome = _run("pass")
    assert outcome["imported"] == outcome["before"] == outcome["once"]
    assert outcome["imported"]["apply_entry"] == "original"
    assert outcome["imported"]["is_due"] == "original"
    assert outcome["imported"]["sync"] == "original"
    assert outcome["imported"]["apply_async"] == "original"


@pytest.mark.parametrize("door", list(DOORS), ids=list(DOORS))
def test_each_door_installs_the_hooks_once(door: str) -> None:
    outcome = _run(DOORS[door])
    before = outcome["before"]["receivers"]
    assert isinstance(before, dict)
    expected = {name: before.get(name, 0) + HOOKED.get(name, 0) for name in {*before, *HOOKED}}
    assert outcome["once"] == {
        "receivers": expected,
        "apply_entry": "wrapped once",
        "is_due": "wrapped once",
        "sync": "wrapped once",
        "apply_async": "wrapped once",
    }
    assert outcome["twice"] == outcome["once"], "installing again changes nothing"
