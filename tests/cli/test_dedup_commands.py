"""``zk-recipes dedup``: publish dedup's queued markers, listed and cleared from the command line.

Checked on the server with markers as Celery's publish dedup writes them
(``tests/integrations/celery/test_publish_dedup.py`` makes them with real
publishes and workers): queued (persistent) and running (an ephemeral node
of the worker's session).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from zk_recipes import CreateMode, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.cli._command import cli

ROOT = "/celery/queued"
QUEUED_ID = "0b6c4d1e-6f7a-4c9e-9d35-1f5cf2f0e0a1"
RUNNING_ID = "5d7e0c61-2b57-4a3f-8f0a-0f9b6a1d4c22"


def _dedup(cli_env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["dedup", *args], env=cli_env)
    return result.exit_code, result.output


def _markers(client: ZkClient) -> tuple[str, str]:
    queued = f"{ROOT}/proj.report/{'a' * 64}"
    running = f"{ROOT}/proj.sync/task"
    data = {"id": QUEUED_ID, "task": "proj.report", "host": "web1", "pid": 41}
    client.create(queued, json.dumps(data).encode(), parents=True)
    data = {"id": RUNNING_ID, "task": "proj.sync", "host": "worker3", "pid": 77}
    client.create(running, json.dumps(data).encode(), mode=CreateMode.EPHEMERAL, parents=True)
    return queued, running


def test_list_shows_each_marker_with_its_task_id_and_state(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    code, out = _dedup(cli_env, "list")
    assert (code, out) == (
        0,
        f"no queued markers under {ROOT} (another zk_recipes_prefix: --prefix)\n",
    )
    _queued, running = _markers(zk_client)
    code, out = _dedup(cli_env, "list")
    assert code == 0
    first, second = out.splitlines()
    assert first.startswith(
        f"proj.report  aaaaaaaaaaaa  {QUEUED_ID}  queued (published by web1:41)"
    )
    session = f"{zk_client.session_id:#x}"
    assert second.startswith(
        f"proj.sync  task  {RUNNING_ID}  running (worker3:77, session {session})"
    )
    code, out = _dedup(cli_env, "list", "--task", "proj.sync", "--json")
    [row] = json.loads(out)
    assert (row["path"], row["task_id"], row["state"]) == (running, RUNNING_ID, "running")


def test_clear_deletes_the_markers_naming_the_task_ids_and_nothing_else(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    queued, running = _markers(zk_client)
    code, out = _dedup(cli_env, "clear", QUEUED_ID)
    assert (code, out) == (0, f"cleared {queued}: task {QUEUED_ID}\n")
    assert zk_client.exists(queued) is None
    assert zk_client.exists(running) is not None

    code, out = _dedup(cli_env, "clear", RUNNING_ID, QUEUED_ID)
    assert code == 1
    assert f"cleared {running}: task {RUNNING_ID} (its task was running)" in out
    assert f"no queued marker under {ROOT} names task {QUEUED_ID}" in out


def test_a_missing_argument_exits_2_and_zookeeper_unreachable_exits_69(
    cli_env: dict[str, str],
) -> None:
    assert _dedup(cli_env, "clear")[0] == ExitCode.USAGE
    env = {**cli_env, "ZK_RECIPES_HOSTS": "127.0.0.1:1", "ZK_RECIPES_CONNECTION_TIMEOUT": "1"}
    code, out = _dedup(env, "list")
    assert code == ExitCode.UNAVAILABLE
    assert "unreachable" in out
