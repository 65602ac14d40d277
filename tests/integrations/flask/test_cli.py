"""``flask zk ...``: the ``zk-recipes`` commands on the app's settings, in process and in children.

In process through the app's ``test_cli_runner()``; as real processes through
``python -m flask --app tests.integrations.flask.appsite:create_app zk ...``,
whose settings come from the app's config only (no ``ZK_RECIPES_*`` in the
child's environment).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import pytest
from flask import Flask

from tests.processes import live_in_group, written_int
from zk_recipes import Lock, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.frameworks import leader_path, lock_path
from zk_recipes.testing import TcpProxy, free_ports, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory
from zk_recipes_flask._cli import zk_group

from .conftest import SESSION_TIMEOUT, AppFactory

ROOT = Path(__file__).resolve().parents[3]
APP = "tests.integrations.flask.appsite:create_app"

# Waits for a "go" file, recording when it started and ended (a shell script, as users write).
_JOB = 'echo "start $0" >> "$1"/log; touch "$1/running-$0"; \
while [ ! -e "$1/go" ]; do sleep 0.05; done; echo "end $0" >> "$1"/log'


def _job(tag: str, where: Path) -> list[str]:
    return ["sh", "-c", _JOB, tag, str(where)]


# -- in process: the app's test CLI runner ---------------------------------------


def _invoke(app: Flask, *args: str) -> tuple[int, str]:
    result = app.test_cli_runner().invoke(args=["zk", *args])
    return result.exit_code, result.output


def test_flask_zk_help_lists_the_commands(make_app: AppFactory) -> None:
    app, _ = make_app()
    code, out = _invoke(app, "--help")
    assert code == 0
    listed = re.findall(r"^  (\w+)  ", out.split("Commands:")[1], re.MULTILINE)
    # The zk-recipes commands, but no `server`.
    assert listed == [
        "announce",
        "beat",
        "dedup",
        "ensemble",
        "holders",
        "leader",
        "lock",
        "queue",
        "services",
        "status",
    ]
    assert "--hosts" not in out
    assert "75 busy" in out
    code, out = _invoke(app, "lock", "--help")
    assert code == 0
    assert "flask zk lock --timeout 60 deploy -- ./deploy.sh" in out
    assert "--no-wait" in out


def test_status_json_is_the_apps_session(make_app: AppFactory, zk_namespace: str) -> None:
    app, _ = make_app()
    code, out = _invoke(app, "status", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["state"] == "CONNECTED"
    assert report["namespace"] == zk_namespace
    assert report["negotiated_session_timeout"] == pytest.approx(SESSION_TIMEOUT)
    code, out = _invoke(app, "status")
    assert code == 0
    assert "CONNECTED" in out


def test_holders_shows_a_lock_another_client_holds(
    make_app: AppFactory, zk_client: ZkClient
) -> None:
    app, _ = make_app()
    held = Lock(zk_client, lock_path("demo"), identifier="worker-7")
    assert held.acquire()
    code, out = _invoke(app, "holders", "--json")
    assert code == 0, out
    (recipe,) = [r for r in json.loads(out) if r["path"] == lock_path("demo")]
    assert recipe["kind"] == "lock"
    (holder,) = recipe["holders"]
    assert holder["id"] == "worker-7"
    assert holder["pid"] == os.getpid()

    code, out = _invoke(app, "holders", lock_path("demo"))
    assert code == 0, out
    assert "worker-7" in out
    code, out = _invoke(app, "holders", "/elsewhere", "--json")
    assert code == 0, out
    assert json.loads(out) == []
    held.release()


def test_lock_and_leader_pass_the_commands_status_on(make_app: AppFactory) -> None:
    app, _ = make_app()
    assert _invoke(app, "lock", "demo", "--", "sh", "-c", "exit 3")[0] == 3
    assert _invoke(app, "lock", "demo", "--timeout", "5", "--", "true")[0] == 0
    assert _invoke(app, "leader", "beat", "--", "true")[0] == 0
    assert _invoke(app, "leader", "beat", "--", "sh", "-c", "exit 4")[0] == 4


def test_lock_takes_the_apps_prefix(make_app: AppFactory, zk_client: ZkClient) -> None:
    app, _ = make_app(ZK_RECIPES_PREFIX="/shop")
    held = Lock(zk_client, "/shop/locks/demo", identifier="nightly")
    assert held.acquire()
    code, out = _invoke(app, "lock", "demo", "--no-wait", "--", "true")
    assert code == ExitCode.BUSY, out
    assert re.search(r"lock demo is held by \S+:\d+ \(nightly\)", out), out
    assert _invoke(app, "lock", "/elsewhere/demo", "--no-wait", "--", "true")[0] == 0
    held.release()


def test_usage_errors_exit_2(make_app: AppFactory) -> None:
    app, _ = make_app()
    code, out = _invoke(app, "lock", "demo")  # no command
    assert code == ExitCode.USAGE
    assert "COMMAND" in out
    code, out = _invoke(app, "lock", "--no-wait", "--timeout", "3", "demo", "--", "true")
    assert code == ExitCode.USAGE
    assert "not both" in out
    code, out = _invoke(app, "status", "--hosts", "zk1:2181")  # the app's settings only
    assert code == ExitCode.USAGE
    assert "--hosts" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("holders", "notabs"), "PATH 'notabs' is relative"),
        (("holders", "/a//b/"), "ends with '/': drop the trailing slash; has an empty segment"),
        (("lock", "../x", "--", "true"), "lock name '../x': its path"),
        (("lock", "", "--", "true"), "a lock name must be"),
        (("leader", "/zookeeper/x", "--", "true"), "is reserved by ZooKeeper"),
        (("lock", "--timeout", "nan", "demo", "--", "true"), "--timeout must be a finite"),
        (("leader", "--grace", "-2", "demo", "--", "true"), "--grace must be a finite"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    make_app: AppFactory, zk_client: ZkClient, args: tuple[str, ...], says: str
) -> None:
    app, _ = make_app()
    code, out = _invoke(app, *args)
    assert code == ExitCode.USAGE, out
    assert out.strip().splitlines() == [out.strip()], out
    assert out.startswith("zk-recipes: ")
    assert says in out
    assert zk_client.get_children("/") == []


def test_unreachable_zookeeper_exits_69(make_app: AppFactory) -> None:
    (port,) = free_ports(1)
    app, _ = make_app(ZK_RECIPES_HOSTS=f"127.0.0.1:{port}", ZK_RECIPES_CONNECTION_TIMEOUT=1.0)
    for args in (("status",), ("holders",), ("lock", "demo", "--", "true")):
        code, out = _invoke(app, *args)
        assert code == ExitCode.UNAVAILABLE, out
        assert "zk-recipes: ZooKeeper is unreachable" in out
        if args[0] == "lock":  # waits the connection timeout (1 s here)
            assert f"at 127.0.0.1:{port} within 1 s" in out
        else:  # must not wait: ends once every server refused
            assert f"every server of 127.0.0.1:{port} refused the connection" in out


def test_an_app_without_the_extension_exits_78_with_the_fix() -> None:
    app = Flask("bare")
    app.cli.add_command(zk_group)
    code, out = _invoke(app, "status")
    assert code == ExitCode.CONFIG
    assert "ZkRecipes was not initialised for the app 'bare': call zk.init_app(app)" in out


# -- real processes: python -m flask --app ... zk ... ------------------------------


@pytest.fixture
def app_env(zk_hosts: str, zk_namespace: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ZK_RECIPES_", "FLASK_", "SHOP_ZK_"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]),
        SHOP_ZK_HOSTS=zk_hosts,
        SHOP_ZK_NAMESPACE=zk_namespace,
        SHOP_ZK_SESSION_TIMEOUT=str(SESSION_TIMEOUT),
    )
    return env


class _Flask:
    """``python -m flask --app appsite zk ARGS`` as a child process."""

    def __init__(
        self, args: Sequence[str], env: dict[str, str], cwd: Path, *, new_group: bool = False
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", APP, "zk", *args],
            env=env,
            cwd=cwd,  # no .env / .flaskenv of the repository's
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_group,
        )

    def wait(self, timeout: float = 30.0) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out, err

    def running(self) -> bool:
        return self.process.poll() is None


class StartFlask(Protocol):
    def __call__(
        self, args: Sequence[str], env: dict[str, str] | None = None, *, new_group: bool = False
    ) -> _Flask: ...


@pytest.fixture
def flask_zk(app_env: dict[str, str], tmp_path: Path) -> Iterator[StartFlask]:
    """Start ``flask zk ARGS`` (in the app's environment by default); killed at the end."""
    started: list[_Flask] = []
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def start(
        args: Sequence[str], env: dict[str, str] | None = None, *, new_group: bool = False
    ) -> _Flask:
        run = _Flask(args, app_env if env is None else env, cwd, new_group=new_group)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.running():
            run.process.kill()
            run.wait()


def test_a_bad_name_in_a_real_process_is_one_line_and_no_traceback(flask_zk: StartFlask) -> None:
    code, out, err = flask_zk(["holders", "notabs"]).wait()
    assert out == ""
    assert code == ExitCode.USAGE, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [
        "zk-recipes: PATH 'notabs' is relative: znode paths start with '/'; give a path "
        "under the namespace, like /zk-recipes/locks (or / for all)"
    ]
    code, _, err = flask_zk(["lock", "../x", "--", "true"]).wait()
    assert code == ExitCode.USAGE, err
    assert len(err.strip().splitlines()) == 1, err


def test_two_no_wait_runs_one_runs_the_other_is_busy(flask_zk: StartFlask, tmp_path: Path) -> None:
    first = flask_zk(["lock", "demo", "--no-wait", "--", *_job("A", tmp_path)])
    wait_until(lambda: (tmp_path / "running-A").exists(), "the first command runs", timeout=20)

    code, _, err = flask_zk(["lock", "demo", "--no-wait", "--", *_job("B", tmp_path)]).wait()
    assert code == ExitCode.BUSY, err
    assert first.running()  # refused while the first still held it: no waiting
    assert not (tmp_path / "running-B").exists()
    assert re.search(r"lock demo is held by \S+:\d+ \(sh -c", err), err

    (tmp_path / "go").touch()
    assert first.wait()[0] == 0
    assert (tmp_path / "log").read_text().split("\n")[:2] == ["start A", "end A"]


def test_timeout_serialises_or_gives_the_timeout_code(flask_zk: StartFlask, tmp_path: Path) -> None:
    first = flask_zk(["lock", "demo", "--", *_job("A", tmp_path)])
    wait_until(lambda: (tmp_path / "running-A").exists(), "the first command runs", timeout=20)

    code, _, err = flask_zk(["lock", "demo", "--timeout", "1", "--", *_job("T", tmp_path)]).wait()
    assert code == ExitCode.TIMED_OUT, err
    assert not (tmp_path / "running-T").exists()

    second = flask_zk(["lock", "demo", "--timeout", "30", "--", *_job("B", tmp_path)])
    time.sleep(1.0)  # give the second every chance to (wrongly) start early
    assert not (tmp_path / "running-B").exists()
    (tmp_path / "go").touch()
    assert first.wait()[0] == 0
    assert second.wait()[0] == 0
    assert (tmp_path / "log").read_text().split("\n")[:4] == [
        "start A",
        "end A",
        "start B",
        "end B",
    ]


@pytest.mark.slow
def test_lost_session_stops_the_command_then_kills_it(
    flask_zk: StartFlask, app_env: dict[str, str], zk_proxy: TcpProxy, tmp_path: Path
) -> None:
    env = dict(app_env, SHOP_ZK_HOSTS=zk_proxy.connect_string, SHOP_ZK_SESSION_TIMEOUT="2")
    script = f"trap '' TERM; echo $$ > {tmp_path}/pid; while true; do sleep 0.05; done"
    run = flask_zk(["lock", "demo", "--grace", "0.5", "--", "sh", "-c", script], env)
    pid = written_int(tmp_path / "pid", "the command runs")
    zk_proxy.blackhole()  # the server hears nothing more: the session expires there
    code, _, err = run.wait()
    assert code == ExitCode.LOST, err
    assert "was lost while sh" in err
    assert "SIGKILL after 0.5s" in err
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
def test_a_standby_takes_over_after_kill_9_of_the_leaders_group(
    flask_zk: StartFlask, zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    a = flask_zk(["leader", "beat", "--", *_job("A", tmp_path)], new_group=True)
    wait_until(lambda: (tmp_path / "running-A").exists(), "A leads", timeout=20)
    b = flask_zk(["leader", "beat", "--", *_job("B", tmp_path)], new_group=True)
    watcher = zk_client_factory()
    wait_until(lambda: len(watcher.get_children(leader_path("beat"))) == 2, "B stands by", 20)
    assert not (tmp_path / "running-B").exists()
    os.killpg(a.process.pid, signal.SIGKILL)
    a.wait()
    # Within the session timeout, plus the time to notice and start.
    wait_until(
        lambda: (tmp_path / "running-B").exists(), "B took over", timeout=SESSION_TIMEOUT + 3.0
    )
    (tmp_path / "go").touch()
    assert b.wait()[0] == 0


# -- faces under failure: the outage rule, the command's process group ----------------


def test_a_silent_zookeeper_gives_69_within_the_timeout_never_busy(
    make_app: AppFactory, zk_proxy: TcpProxy, tmp_path: Path
) -> None:
    patient, _ = make_app(
        ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_CONNECTION_TIMEOUT=20.0
    )
    quick, _ = make_app(ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_CONNECTION_TIMEOUT=1.0)
    zk_proxy.blackhole()  # connections are accepted, and nothing ever answers
    never = ["--", "touch", str(tmp_path / "ran")]
    try:
        began = time.monotonic()
        code, out = _invoke(patient, "lock", "--timeout", "1", "demo", *never)
        assert code == ExitCode.UNAVAILABLE, out
        assert time.monotonic() - began < 10  # --timeout 1, not the 20 s connection timeout
        code, out = _invoke(quick, "lock", "--no-wait", "demo", *never)
        assert code == ExitCode.UNAVAILABLE, out
        assert "busy" not in out
    finally:
        zk_proxy.heal()
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_kill_9_of_flask_zk_leader_takes_the_commands_group_with_it(
    flask_zk: StartFlask, tmp_path: Path
) -> None:
    script = 'sleep 60 & echo $$ > "$1/group"; sleep 61'
    run = flask_zk(["leader", "beat", "--", "sh", "-c", script, "A", str(tmp_path)])
    group = written_int(tmp_path / "group", "the command runs")
    wait_until(lambda: len(live_in_group(group)) == 3, "sh and its two sleeps", timeout=10)
    run.process.kill()  # SIGKILL
    run.wait()
    wait_until(lambda: not live_in_group(group), "the command's group gone", timeout=5)
