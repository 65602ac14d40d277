"""``zk-recipes queue dead``: a queue's dead letters listed, put back and dropped from a shell."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.containers import children_of
from zk_recipes import DistributedQueue, ItemContext, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.cli._command import cli
from zk_recipes.testing import wait_until


def _dead(cli_env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["queue", "dead", *args], env=cli_env)
    return result.exit_code, result.output


def _poisoned(client: ZkClient, *items: bytes) -> list[str]:
    """Put ``items`` into /jobs and let a consumer fail on each once: dead letters."""

    def fails(value: bytes, context: ItemContext) -> None:
        raise ValueError(f"bad {value.decode()}")

    with DistributedQueue(
        client, "/jobs", fails, lock_path="/jobs-locks", max_attempts=1, retry_backoff=0.01
    ) as queue:
        names = [queue.put(item).rsplit("/", 1)[1] for item in items]
        wait_until(lambda: len(queue.dead_letters()) == len(items), "dead letters")
    return names


def test_list_requeue_and_purge(cli_env: dict[str, str], zk_client: ZkClient) -> None:
    code, out = _dead(cli_env, "list", "/jobs")
    assert (code, out.strip()) == (0, "no dead letters under /jobs-dead")
    first, second, third = _poisoned(zk_client, b"a", b"b", b"c")
    code, out = _dead(cli_env, "list", "/jobs")
    assert code == 0
    assert f"{first}  1 attempts  1 item(s), 1 bytes  last error: ValueError: bad a" in out
    code, out = _dead(cli_env, "list", "/jobs", "--json")
    rows = json.loads(out)
    assert [(r["name"], r["attempts"], r["items"]) for r in rows] == [
        (first, 1, ["a"]),
        (second, 1, ["b"]),
        (third, 1, ["c"]),
    ]
    code, out = _dead(cli_env, "purge", "/jobs", third)
    assert (code, out.strip()) == (0, "purged 1 dead letter(s) of /jobs")
    code, out = _dead(cli_env, "requeue", "/jobs", "--all")
    assert (code, out.strip()) == (0, "requeued 2 dead letter(s) of /jobs")
    assert children_of(zk_client, "/jobs-dead") == []
    with DistributedQueue(zk_client, "/jobs") as queue:
        assert sorted(queue.items()) == [b"a", b"b"]  # back, with no attempts counted


def test_a_missing_name_exits_1_and_a_bad_argument_2(
    cli_env: dict[str, str], zk_client: ZkClient
) -> None:
    [name] = _poisoned(zk_client, b"x")
    code, out = _dead(cli_env, "purge", "/jobs", name, "queue-9999999999")
    assert code == 1
    assert "no dead letter queue-9999999999 under /jobs-dead" in out
    assert children_of(zk_client, "/jobs-dead") == []  # the one there was purged
    code, out = _dead(cli_env, "requeue", "/jobs")
    assert code == ExitCode.USAGE
    assert "by NAME, or --all" in out
    code, out = _dead(cli_env, "requeue", "jobs", "--all")
    assert code == ExitCode.USAGE
