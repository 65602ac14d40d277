"""``zk-recipes beat``: the schedule Celery's ZkScheduler reads, changed from the command line.

Checked on the server (the nodes and JSON the scheduler reads, the kit's
``BeatSchedule``); the scheduler itself is tested with real beats in
tests/integrations/celery/test_zk_scheduler.py.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from zk_recipes import ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.cli._command import cli
from zk_recipes.frameworks import BeatSchedule, LastRun


def _beat(cli_env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["beat", *args, "--beat", "proj"], env=cli_env)
    return result.exit_code, result.output


def test_add_list_change_disable_enable_and_remove(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    code, out = _beat(cli_env, "add", "report", "proj.report", "--every", "300", "--args", "[1]")
    assert (code, out.strip()) == (0, "added report: proj.report, every 300s")
    code, out = _beat(cli_env, "add", "nightly", "proj.cleanup", "--crontab", "0 3 * * 1-5")
    assert code == 0
    schedule = BeatSchedule(zk_client, "/celery", "proj")
    nightly = schedule.get("nightly")
    assert nightly is not None
    assert nightly.schedule == {
        "crontab": {
            "minute": "0",
            "hour": "3",
            "day_of_month": "*",
            "month_of_year": "*",
            "day_of_week": "1-5",
        }
    }
    # The leader beat records runs here; the list shows them.
    zk_client.create(
        "/celery/schedule/proj/runs/report", LastRun(1_800_000_000.0, 7).to_bytes(), parents=True
    )
    code, out = _beat(cli_env, "list")
    assert code == 0
    assert "nightly  proj.cleanup  crontab 0 3 * * 1-5  last: never" in out
    assert "report  proj.report  every 300s  last: 2027-01-15 08:00:00Z (7 runs)" in out

    code, out = _beat(cli_env, "add", "report", "proj.report", "--every", "60")
    assert out.strip() == "changed report: proj.report, every 60s"
    assert _beat(cli_env, "disable", "report")[0] == 0
    code, out = _beat(cli_env, "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["report"]["enabled"] is False
    assert rows["report"]["schedule"] == {"every": 60.0}
    assert rows["report"]["total_run_count"] == 7
    assert _beat(cli_env, "enable", "report")[0] == 0
    enabled = schedule.get("report")
    assert enabled is not None
    assert enabled.enabled

    assert _beat(cli_env, "remove", "report") == (0, "removed report\n")
    assert schedule.get("report") is None
    assert zk_client.exists("/celery/schedule/proj/runs/report") is None
    code, out = _beat(cli_env, "remove", "report")
    assert code == 1
    assert "no entry report in beat proj" in out
    assert _beat(cli_env, "disable", "nothing")[0] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "e", "t"], "give one of --every SECONDS"),
        (["add", "e", "t", "--every", "5", "--crontab", "* * * * *"], "give one of"),
        (["add", "e", "t", "--every", "0"], "every must be seconds > 0"),
        (["add", "e", "t", "--crontab", "* * *"], "a crontab has 5 fields"),
        (["add", "e", "t", "--solar", "noon:1:2"], "event is one of"),
        (["add", "e", "t", "--every", "5", "--args", "{}"], "--args: a JSON list"),
        (["add", "e", "t", "--every", "5", "--kwargs", "[1"], "--kwargs: not JSON"),
        (["add", "a/b", "t", "--every", "5"], "without '/'"),
    ],
)
def test_a_bad_argument_exits_2_and_writes_nothing(
    cli_env: dict[str, str], zk_client: ZkClient, args: list[str], message: str
) -> None:
    code, out = _beat(cli_env, *args)
    assert code == ExitCode.USAGE
    assert message in out
    assert BeatSchedule(zk_client, "/celery", "proj").entries() == []


def test_zookeeper_unreachable_exits_69(cli_env: dict[str, str]) -> None:
    env = {**cli_env, "ZK_RECIPES_HOSTS": "127.0.0.1:1", "ZK_RECIPES_CONNECTION_TIMEOUT": "1"}
    code, out = _beat(env, "list")
    assert code == ExitCode.UNAVAILABLE
    assert "unreachable" in out
