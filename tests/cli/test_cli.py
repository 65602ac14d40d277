"""The ``zk-recipes`` command, run as users run it: real processes, real ZooKeeper, real signals."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import zk_recipes
from tests.processes import CliRun, written_int
from zk_recipes import Lock, NoNodeError, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.cli._command import cli
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import TcpProxy, ZooKeeperServer, free_ports, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

# Waits for a "go" file, recording when it started and ended (a shell script, as users write).
_JOB = 'echo "start $0" >> "$1"/log; touch "$1/running-$0"; \
while [ ! -e "$1/go" ]; do sleep 0.05; done; echo "end $0" >> "$1"/log'


def _job(tag: str, where: Path) -> list[str]:
    return ["sh", "-c", _JOB, tag, str(where)]


def _run(args: Sequence[str], env: dict[str, str], timeout: float = 30.0) -> tuple[int, str, str]:
    return CliRun(args, env).wait(timeout)


def _children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def test_help_version_and_python_m(cli_env: dict[str, str]) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "zk-recipes lock db-migrate -- ./manage.py migrate" in result.output
    assert "75 busy" in result.output
    for command in ("lock", "leader", "holders", "status", "server"):
        assert command in result.output
        sub = runner.invoke(cli, [command, "--help"])
        assert sub.exit_code == 0, sub.output
    assert "--no-wait" in runner.invoke(cli, ["lock", "--help"]).output
    version = runner.invoke(cli, ["--version"])
    assert version.exit_code == 0
    assert zk_recipes.__version__ in version.output
    code, out, _ = _run(["--help"], cli_env)
    assert code == 0
    assert "Usage: zk-recipes" in out


def test_usage_errors_exit_2_with_a_message() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["lock", "demo"])  # no command
    assert result.exit_code == ExitCode.USAGE
    assert "COMMAND" in result.output
    result = runner.invoke(cli, ["lock", "--no-wait", "--timeout", "3", "demo", "--", "true"])
    assert result.exit_code == ExitCode.USAGE
    assert "not both" in result.output


#: A bad argument as users type it, and what the one line must say (issue 23, item 3).
_BAD_ARGUMENTS = [
    (["holders", "notabs"], "PATH 'notabs' is relative: znode paths start with '/'"),
    (["holders", ""], "PATH '' is relative"),
    (["holders", "/a//b/"], "ends with '/': drop the trailing slash; has an empty segment"),
    (["lock", "../x", "--", "true"], "lock name '../x': its path '/zk-recipes/locks/../x'"),
    (["lock", "", "--", "true"], "a lock name must be non-empty: a name like 'db-migrate'"),
    (["lock", "/", "--", "true"], "a lock name must be"),
    (["lock", "/zookeeper/x", "--", "true"], "lock name '/zookeeper/x' is reserved"),
    (["lock", "a\x01b", "--", "true"], "(U+0001), which ZooKeeper does not allow"),
    (["leader", "", "--", "true"], "a leader name must be"),
    (["leader", "../x", "--", "true"], "leader name '../x': its path '/zk-recipes/leaders/"),
    (["lock", "--timeout", "nan", "demo", "--", "true"], "--timeout must be a finite number"),
    (["lock", "--timeout", "-1", "demo", "--", "true"], "--timeout must be a finite number"),
    (["lock", "--timeout", "inf", "demo", "--", "true"], "--timeout must be a finite number"),
    (["lock", "--timeout", "soon", "demo", "--", "true"], "--timeout must be a number"),
    (["lock", "--grace", "nan", "demo", "--", "true"], "--grace must be a finite number"),
    (["leader", "--grace", "inf", "demo", "--", "true"], "--grace must be a finite number"),
]


@pytest.mark.parametrize(
    ("args", "says"), _BAD_ARGUMENTS, ids=[" ".join(a[:3]) for a, _ in _BAD_ARGUMENTS]
)
def test_a_bad_argument_is_one_line_and_exit_2(
    cli_env: dict[str, str], zk_client: ZkClient, args: list[str], says: str
) -> None:
    code, out, err = _run(args, cli_env)
    assert code == ExitCode.USAGE, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()], err  # one line
    assert err.startswith("zk-recipes: ")
    assert says in err
    assert out == ""
    assert zk_client.get_children("/") == []  # checked before anything was made


def test_a_bad_namespace_names_the_option_and_every_problem(cli_env: dict[str, str]) -> None:
    code, _, err = _run(["--namespace", "a//b/../", "status"], cli_env)
    assert code == ExitCode.CONFIG, err
    assert err.strip().splitlines() == [err.strip()], err
    assert err.startswith("zk-recipes: --namespace: ")
    assert "ends with '/'" in err
    assert "has an empty segment" in err
    assert "has a relative segment '..'" in err
    assert "namespace=" not in err


def test_a_chroot_in_the_hosts_points_to_the_namespace_option(cli_env: dict[str, str]) -> None:
    code, _, err = _run(["--hosts", "zk1:2181/app", "status"], cli_env)
    assert code == ExitCode.CONFIG, err
    assert "--namespace" in err
    assert "namespace=" not in err
    env = dict(cli_env, ZK_RECIPES_HOSTS="zk1:2181/app")
    code, _, err = _run(["status"], env)
    assert code == ExitCode.CONFIG, err
    assert "environment variable ZK_RECIPES_HOSTS" in err
    assert "--namespace" in err
    assert "namespace=" not in err


def test_server_without_the_testing_extra_says_which_extra_and_exits_70(
    cli_env: dict[str, str],
) -> None:
    # The testing extra's mirakuru made unimportable, as where it is not installed.
    script = (
        "import sys; sys.modules['mirakuru'] = None; "
        "from zk_recipes.cli import main; main(['server'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=cli_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == ExitCode.NOT_INSTALLED, result.stderr
    assert int(ExitCode.NOT_INSTALLED) == 70
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "needs the testing extra" in lines[0]
    assert "pip install 'zk-recipes[testing]'" in lines[0]


def test_two_no_wait_runs_one_runs_the_other_is_busy(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    first = CliRun(["lock", "demo", "--no-wait", "--", *_job("A", tmp_path)], cli_env)
    cli_runs.append(first)
    wait_until(lambda: (tmp_path / "running-A").exists(), "the first command runs", timeout=20)

    code, _, err = _run(["lock", "demo", "--no-wait", "--", *_job("B", tmp_path)], cli_env)
    assert code == ExitCode.BUSY
    assert first.running()  # refused while the first still held it: no waiting
    assert not (tmp_path / "running-B").exists()
    assert re.search(r"lock demo is held by \S+:\d+ \(sh -c", err), err

    (tmp_path / "go").touch()
    assert first.wait()[0] == 0
    assert (tmp_path / "log").read_text().split("\n")[:2] == ["start A", "end A"]


def test_timeout_serialises_or_gives_the_timeout_code(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    first = CliRun(["lock", "demo", "--", *_job("A", tmp_path)], cli_env)
    cli_runs.append(first)
    wait_until(lambda: (tmp_path / "running-A").exists(), "the first command runs", timeout=20)

    code, _, err = _run(["lock", "demo", "--timeout", "1", "--", *_job("T", tmp_path)], cli_env)
    assert code == ExitCode.TIMED_OUT, err
    assert not (tmp_path / "running-T").exists()

    second = CliRun(["lock", "demo", "--timeout", "30", "--", *_job("B", tmp_path)], cli_env)
    cli_runs.append(second)
    time.sleep(1.0)  # give the second every chance to (wrongly) start early
    assert not (tmp_path / "running-B").exists()
    (tmp_path / "go").touch()
    assert first.wait()[0] == 0
    assert second.wait()[0] == 0
    assert (tmp_path / "log").read_text().split() == [
        "start",
        "A",
        "end",
        "A",
        "start",
        "B",
        "end",
        "B",
    ]


def test_sigterm_reaches_the_command_and_frees_the_lock_at_once(
    cli_env: dict[str, str], zk_client: ZkClient, tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    script = (
        f"trap 'echo term >> {tmp_path}/log; exit 7' TERM; touch {tmp_path}/running; "
        "while true; do sleep 0.05; done"
    )
    run = CliRun(["lock", "demo", "--", "sh", "-c", script], cli_env)
    cli_runs.append(run)
    wait_until(lambda: (tmp_path / "running").exists(), "the command runs", timeout=20)
    assert len(_children(zk_client, lock_path("demo"))) == 1
    run.process.send_signal(signal.SIGTERM)
    code, _, err = run.wait()
    assert code == 7, err  # the command's own status
    assert (tmp_path / "log").read_text() == "term\n"
    # Released before the process exited, not at session expiry.
    assert _children(zk_client, lock_path("demo")) == []


def test_sigint_while_waiting_gives_up_and_never_runs(
    cli_env: dict[str, str],
    zk_client_factory: ClientFactory,
    tmp_path: Path,
    cli_runs: list[CliRun],
) -> None:
    holder = Lock(zk_client_factory(), lock_path("demo"))
    assert holder.acquire()
    run = CliRun(["lock", "demo", "--", *_job("W", tmp_path)], cli_env)
    cli_runs.append(run)
    wait_until(lambda: len(_children(holder.client, lock_path("demo"))) == 2, "queued", 20)
    run.process.send_signal(signal.SIGINT)
    code, _, err = run.wait()
    assert code == 128 + signal.SIGINT
    assert "the command did not run" in err
    assert not (tmp_path / "running-W").exists()
    assert len(_children(holder.client, lock_path("demo"))) == 1  # its queued node went too


@pytest.mark.slow
def test_lost_session_stops_the_command_then_kills_it(
    cli_env: dict[str, str], zk_proxy: TcpProxy, tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    env = dict(cli_env, ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_SESSION_TIMEOUT="2")
    script = f"trap '' TERM; echo $$ > {tmp_path}/pid; while true; do sleep 0.05; done"
    run = CliRun(["lock", "demo", "--grace", "0.5", "--", "sh", "-c", script], env)
    cli_runs.append(run)
    pid = written_int(tmp_path / "pid", "the command runs")
    zk_proxy.blackhole()  # the server hears nothing more: the session expires there
    code, _, err = run.wait()
    assert code == ExitCode.LOST, err
    assert "was lost while sh" in err
    assert "SIGKILL after 0.5s" in err
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_blocked_stderr_does_not_keep_the_command_running_after_a_loss(
    cli_env: dict[str, str],
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    """Act first, talk later: zk-recipes's stderr is a full pipe (a stalled log shipper),
    and still its command is stopped before anyone else can take the lock."""
    env = dict(cli_env, ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_SESSION_TIMEOUT="2")
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 4096)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags)
    script = f"echo $$ > {tmp_path}/pid; exec sleep 60"
    process = subprocess.Popen(
        [sys.executable, "-m", "zk_recipes", "lock", "blocked", "--", "sh", "-c", script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=write_end,
    )
    os.close(write_end)
    try:
        pid = written_int(tmp_path / "pid", "the command runs")
        rival = Lock(
            zk_client_factory(hosts=zk_private_server.connect_string), lock_path("blocked")
        )
        zk_proxy.blackhole()
        assert rival.acquire(timeout=15)
        # The server gave the lock away: the command must be gone by now.
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        rival.release()
    finally:
        threading.Thread(target=lambda: _drain(read_end), daemon=True).start()
        process.kill()
        process.wait(30)
        zk_proxy.heal()


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


@pytest.mark.slow
def test_a_standby_takes_over_after_kill_9_of_the_leaders_group(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    runs = {}
    for tag in ("A", "B"):
        runs[tag] = CliRun(
            ["leader", "beat", "--", *_job(tag, tmp_path)], cli_env, start_new_session=True
        )
        cli_runs.append(runs[tag])
        if tag == "A":
            wait_until(lambda: (tmp_path / "running-A").exists(), "A leads", timeout=20)
    time.sleep(0.5)
    assert not (tmp_path / "running-B").exists()  # B stands by
    os.killpg(runs["A"].process.pid, signal.SIGKILL)
    runs["A"].wait()
    # Within the session timeout (3 s), plus the time to notice and start.
    wait_until(lambda: (tmp_path / "running-B").exists(), "B took over", timeout=3.0 + 3.0)
    (tmp_path / "go").touch()
    assert runs["B"].wait()[0] == 0


def test_holders_json_shows_the_holder_and_the_queue_in_order(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    first = CliRun(["lock", "demo", "--", *_job("A", tmp_path)], cli_env)
    cli_runs.append(first)
    wait_until(lambda: (tmp_path / "running-A").exists(), "A runs", timeout=20)
    second = CliRun(["lock", "demo", "--", *_job("B", tmp_path)], cli_env)
    cli_runs.append(second)

    def report() -> list[dict[str, Any]]:
        code, out, err = _run(["holders", "--json"], cli_env)
        assert code == 0, err
        parsed: list[dict[str, Any]] = json.loads(out)
        return parsed

    wait_until(lambda: any(r["waiting"] for r in report()), "B queued", timeout=20)
    (recipe,) = [r for r in report() if r["path"] == lock_path("demo")]
    assert recipe["kind"] == "lock"
    (holder,) = recipe["holders"]
    (waiter,) = recipe["waiting"]
    assert holder["pid"] == first.process.pid
    assert holder["id"] == shlex.join(_job("A", tmp_path))  # the command line
    assert waiter["pid"] == second.process.pid
    code, table, _ = _run(["holders"], cli_env)
    assert code == 0
    assert str(first.process.pid) in table
    (tmp_path / "go").touch()
    assert first.wait()[0] == 0
    assert second.wait()[0] == 0


def test_status_json_against_a_running_server(cli_env: dict[str, str]) -> None:
    code, out, err = _run(["status", "--json"], cli_env)
    assert code == 0, err
    report = json.loads(out)
    assert report["state"] == "CONNECTED"
    assert report["namespace"] == cli_env["ZK_RECIPES_NAMESPACE"]
    assert report["negotiated_session_timeout"] == pytest.approx(3.0)
    assert report["session_id"].startswith("0x")
    assert report["server"]["version"].startswith("3.")
    assert report["server"]["mode"] in ("standalone", "leader", "follower")
    code, out, _ = _run(["status"], cli_env)
    assert code == 0
    assert "CONNECTED" in out
    assert "ZooKeeper 3." in out


def test_unreachable_zookeeper_and_bad_settings_have_their_codes(cli_env: dict[str, str]) -> None:
    (port,) = free_ports(1)
    unreachable = dict(
        cli_env, ZK_RECIPES_HOSTS=f"127.0.0.1:{port}", ZK_RECIPES_CONNECTION_TIMEOUT="1"
    )
    code, _, err = _run(["lock", "demo", "--", "true"], unreachable)
    assert code == ExitCode.UNAVAILABLE
    assert "unreachable" in err

    code, _, err = _run(["status"], dict(cli_env, ZK_RECIPES_SESSION_TIMEOUT="soon"))
    assert code == ExitCode.CONFIG
    assert "ZK_RECIPES_SESSION_TIMEOUT" in err

    code, _, err = _run(["--hosts", "zk1:2181/chroot", "status"], cli_env)
    assert code == ExitCode.CONFIG
    assert "--hosts" in err
    assert "environment variable" not in err  # the value came from the option

    no_hosts = {k: v for k, v in cli_env.items() if k != "ZK_RECIPES_HOSTS"}
    code, _, err = _run(["holders"], no_hosts)
    assert code == ExitCode.CONFIG
    assert "--hosts" in err
    assert "ZK_RECIPES_HOSTS" in err


@pytest.mark.slow
def test_server_runs_a_throwaway_zookeeper_until_ctrl_c(cli_runs: list[CliRun]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
    run = CliRun(["server"], env)
    cli_runs.append(run)
    assert run.process.stdout is not None
    line = run.process.stdout.readline()
    match = re.match(r"ZooKeeper is serving at (\S+) \(data in (\S+)\)", line)
    assert match, line
    connect_string, data_dir = match.group(1), Path(match.group(2))
    with ZkClient(connect_string) as client:
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
    run.process.send_signal(signal.SIGINT)
    code, out, err = run.wait()
    assert code == 0, err
    assert "stopped" in out
    assert not data_dir.exists()


def test_importing_the_engine_does_not_import_click(cli_env: dict[str, str]) -> None:
    code = "import sys, zk_recipes.cli; print('click' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
