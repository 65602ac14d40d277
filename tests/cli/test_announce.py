"""``zk-recipes announce`` and ``services``: an instance registered exactly while its command runs.

Runs are real processes against the test's server (3 s sessions). The
command is a shell that writes its pid and waits for a file, so a test
decides when it ends, or kills it, or kills the supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.processes import CliRun, live_in_group, written_int
from zk_recipes import ServiceDiscovery, ServiceInstance, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.testing import wait_until

# Writes its pid, waits for "$1/stop", exits 3.
_SERVE = 'echo $$ > "$1/pid"; while [ ! -e "$1/stop" ]; do sleep 0.05; done; exit 3'
NODE = "/services/orders/o1"


def _announce(tmp_path: Path, env: dict[str, str], *extra: str) -> CliRun:
    return CliRun(
        ["announce", "orders", "--port", "8080", "--id", "o1", "--address", "10.1.2.3", *extra,
         "--", "sh", "-c", _SERVE, "serve", str(tmp_path)],
        env,
    )  # fmt: skip


def test_registered_while_the_command_runs_and_gone_the_moment_it_ends(
    cli_env: dict[str, str], zk_client: ZkClient, tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    run = _announce(tmp_path, cli_env, "--payload", '{"@class":"java.util.HashMap","v":"1"}')
    cli_runs.append(run)
    written_int(tmp_path / "pid", "the command's pid")
    wait_until(lambda: zk_client.exists(NODE) is not None, "registered")
    found = ServiceDiscovery(zk_client).query_for_instance("orders", "o1")
    assert found is not None
    assert (found.address, found.port, found.payload) == (
        "10.1.2.3",
        8080,
        {"@class": "java.util.HashMap", "v": "1"},
    )
    listing = CliRun(["services", "orders", "--json"], cli_env)
    code, out, err = listing.wait()
    assert code == 0, err
    assert json.loads(out)["orders"][0]["id"] == "o1"
    (tmp_path / "stop").touch()
    code, _, err = run.wait()
    assert code == 3, err  # the command's own status
    assert zk_client.exists(NODE) is None  # deleted, not left for the session to expire


def test_kill_9_of_the_command_unregisters_at_once_and_of_the_supervisor_within_the_session(
    cli_env: dict[str, str], zk_client: ZkClient, tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    run = _announce(tmp_path, cli_env)
    cli_runs.append(run)
    os.kill(written_int(tmp_path / "pid", "the command's pid"), signal.SIGKILL)
    code, _, _ = run.wait()
    assert code == 128 + signal.SIGKILL
    assert zk_client.exists(NODE) is None

    (tmp_path / "pid").unlink()
    second = _announce(tmp_path, cli_env)
    cli_runs.append(second)
    group = os.getpgid(written_int(tmp_path / "pid", "the command's pid"))
    wait_until(lambda: zk_client.exists(NODE) is not None, "registered")
    os.kill(second.process.pid, signal.SIGKILL)
    killed = time.monotonic()
    second.wait()
    wait_until(lambda: not live_in_group(group), "the command's group stopped with it", timeout=5)
    wait_until(lambda: zk_client.exists(NODE) is None, "gone with the session", timeout=10)
    assert time.monotonic() - killed < 3.0 + 3  # the 3 s session, with margin


def test_services_lists_names_and_instances_and_an_id_in_use_is_refused(
    cli_env: dict[str, str], zk_client: ZkClient, tmp_path: Path
) -> None:
    with ServiceDiscovery(zk_client) as discovery:
        discovery.register(ServiceInstance(name="billing", id="b1", address="h", port=1))
        discovery.register(ServiceInstance(name="orders", id="o1", address="h", port=2))
        code, out, err = CliRun(["services"], cli_env).wait()
        assert code == 0, err
        assert "billing: 1 instance\n  b1  h:1  DYNAMIC" in out
        assert "orders: 1 instance" in out
        code, _, err = _announce(tmp_path, cli_env).wait()
        assert code == ExitCode.CONFIG
        assert "registered by another session" in err
        assert not (tmp_path / "pid").exists()  # the command never ran
    code, out, _ = CliRun(["services", "--base-path", "/nothing"], cli_env).wait()
    assert (code, out) == (0, "no services under /nothing\n")


def test_unreachable_zookeeper_exits_69_without_running_the_command(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    env = dict(cli_env, ZK_RECIPES_HOSTS="127.0.0.1:1", ZK_RECIPES_CONNECTION_TIMEOUT="2")
    started = time.monotonic()
    code, _, err = _announce(tmp_path, env).wait()
    assert code == ExitCode.UNAVAILABLE, err
    assert time.monotonic() - started < 10
    assert not (tmp_path / "pid").exists()
