"""``zk-recipes beat``: the schedule Celery's ZkScheduler reads, changed from the command line.

Checked on the server (the nodes and JSON the scheduler reads, the kit's
``BeatSchedule``); the scheduler itself is tested with real beats in
tests/integrations/celery/test_zk_scheduler.py.
"""

from __future__ import annotations

import importlib.util
import json
import random

import pytest
from click.testing import CliRunner

from zk_recipes import ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.cli._command import cli
from zk_recipes.frameworks import BeatSchedule, LastRun, ScheduleError, check_schedule
from zk_recipes.frameworks._beat_checks import CRONTAB_FIELDS, CRONTAB_RANGES, parse_cron_field


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
        # Issue 35: each of these was stored, and then stopped every beat.
        (["add", "e", "t", "--crontab", "61 * * * *"], "crontab minute '61': 61 is above 59"),
        (["add", "e", "t", "--crontab", "x * * * *"], "'x' is neither a number nor a month"),
        (["add", "e", "t", "--crontab", "*/0 * * * *"], "crontab minute '*/0': a step of 0"),
        (["add", "e", "t", "--crontab", "* 25 * * *"], "crontab hour '25': 25 is above 23"),
        (["add", "e", "t", "--crontab", "0 0 31 2 *"], "day_of_month '31' never occurs"),
        (["add", "e", "t", "--crontab", "0 0 * * 7"], "day_of_week '7': 7 is above 6"),
        (["add", "e", "t", "--crontab", "-1 * * * *"], "negative numbers are not supported"),
        (["add", "e", "t", "--every", "inf"], "every must be seconds > 0 and at most"),
        (["add", "e", "t", "--every", "1e20"], "every must be seconds > 0 and at most"),
        (["add", "e", "t", "--solar", "sunset:north:2"], "give EVENT:LAT:LON"),
    ],
)
def test_a_bad_argument_exits_2_and_writes_nothing(
    cli_env: dict[str, str], zk_client: ZkClient, args: list[str], message: str
) -> None:
    code, out = _beat(cli_env, *args)
    assert code == ExitCode.USAGE
    assert message in out
    assert BeatSchedule(zk_client, "/celery", "proj").entries() == []


def test_a_solar_entry_without_ephem_is_refused_with_the_fix(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    if importlib.util.find_spec("ephem") is not None:
        pytest.skip("ephem is installed here: the refusal is for a process without it")
    code, out = _beat(cli_env, "add", "dusk", "proj.lights", "--solar", "sunset:48.85:2.35")
    assert code == ExitCode.USAGE
    assert "needs the ephem package" in out
    assert "pip install 'celery[solar]'" in out
    assert BeatSchedule(zk_client, "/celery", "proj").entries() == []


def test_a_bad_node_written_by_hand_is_listed_as_invalid(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    entries = "/celery/schedule/proj/entries"
    assert _beat(cli_env, "add", "good", "proj.report", "--every", "60")[0] == 0
    bad_cron = {"task": "proj.x", "schedule": {"crontab": {"minute": "61"}}}
    zk_client.create(f"{entries}/cron", json.dumps(bad_cron).encode())
    zk_client.create(f"{entries}/java", b"\xac\xed\x00\x05 a serialized Java object")
    code, out = _beat(cli_env, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("cron  INVALID (skipped by every beat): entry cron: crontab minute")
    assert f"[{entries}/cron]" in lines[0]
    assert lines[1].startswith("java  INVALID (skipped by every beat): entry java: not JSON")
    assert lines[2].startswith("good  proj.report  every 60s")
    code, out = _beat(cli_env, "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert "61 is above 59" in rows["cron"]["invalid"]
    assert rows["good"]["invalid"] is None
    assert [e.name for e in BeatSchedule(zk_client, "/celery", "proj").entries()] == ["good"]
    assert _beat(cli_env, "remove", "cron") == (0, "removed cron\n")


def test_an_empty_list_says_where_entries_are(cli_env: dict[str, str]) -> None:
    code, out = _beat(cli_env, "list")
    assert (code, out.splitlines()[0]) == (0, "no entries under /celery/schedule/proj/entries")
    assert "listed with --prefix PREFIX" in out
    assert _beat(cli_env, "add", "r", "proj.report", "--every", "60", "--prefix", "/other")[0] == 0
    code, out = _beat(cli_env, "list")
    assert code == 0
    assert "beat proj has a schedule under /other: give --prefix /other" in out
    result = CliRunner().invoke(cli, ["beat", "list", "--beat", "other"], env=cli_env)
    assert "no entries under /celery/schedule/other/entries" in result.output
    assert "beat other" not in result.output  # /other holds proj's schedule, not other's


def test_zookeeper_unreachable_exits_69(cli_env: dict[str, str]) -> None:
    env = {**cli_env, "ZK_RECIPES_HOSTS": "127.0.0.1:1", "ZK_RECIPES_CONNECTION_TIMEOUT": "1"}
    code, out = _beat(env, "list")
    assert code == ExitCode.UNAVAILABLE
    assert "unreachable" in out


def _corpus() -> list[str]:
    """Crontab fields, picked and random: the grammar's corners and junk."""
    picked = [
        "*", "*/1", "*/7", "*/0", "*/", "*/x", "*/5/3", "*/5-3", "**", "*-5", "0", "00", "59",
        "60", "61", "-1", "1-", "-", "1--5", "5-1", "22-2", "0-59/15", "1-5/", "1-5/0", "1-5/2x",
        "1,2,3", "1,,2", ",1", "1,", "jan", "JANUARY", "mar-may", "dec-feb", "mon", "sunday",
        "mon-fri", "fri-mon", "sat,sun", "x", "ja", "7", "0-6", "1-31/2", "31", "32", "12", "13",
        "monday-friday/2", "feb", "sep-nov/2", "3-3", "a-b", "*/60", "*/61", "10-5/3",
    ]  # fmt: skip
    alphabet = "0123456789*/-,abcdefjmnorstuy"
    rng = random.Random(35)
    made = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(3000)]
    return picked + made


@pytest.mark.parametrize("field_name", CRONTAB_FIELDS)
def test_crontab_fields_parse_exactly_as_celerys_parser(field_name: str) -> None:
    schedules = pytest.importorskip("celery.schedules")
    count, first = CRONTAB_RANGES[field_name]
    disagree = []
    for field in _corpus():
        try:
            ours: object = sorted(parse_cron_field(field_name, field))
        except ScheduleError:
            ours = "refused"
        try:
            theirs: object = sorted(schedules.crontab_parser(count, first).parse(field))
        except (ValueError, schedules.ParseException):
            theirs = "refused"
        if ours != theirs:
            disagree.append((field, ours, theirs))
    assert disagree == []


def test_whole_crontabs_are_refused_exactly_when_celery_refuses_them() -> None:
    schedules = pytest.importorskip("celery.schedules")
    rng = random.Random(2)
    days = ["*", "1", "29", "30", "31", "30-31", "31,1"]
    months = ["*", "2", "feb", "4", "4,6", "2,4", "1", "2-3"]
    for _ in range(200):
        day, month = rng.choice(days), rng.choice(months)
        fields = {"minute": "0", "hour": "0", "day_of_month": day, "month_of_year": month}
        try:
            check_schedule({"crontab": fields})
            ours = True
        except ScheduleError:
            ours = False
        try:
            schedules.crontab(**fields)
            theirs = True
        except ValueError:
            theirs = False
        assert ours == theirs, fields
