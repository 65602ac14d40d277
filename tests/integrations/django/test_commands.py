"""manage.py zklock / zkleader / zkstatus and LockedCommandMixin: real processes, real ZooKeeper.

The commands run as ``manage.py`` processes of the test site (``manage``
fixture), which reads this test's ZooKeeper from its environment; the
command under the lock is ``slowcmd``, which notes its start and end in files
and waits for a ``go`` file, so the tests decide when it ends.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.processes import live_in_group, written_int
from zk_recipes import Lock, NoNodeError, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import TcpProxy, free_ports, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

from .conftest import SESSION_TIMEOUT, Manage, manage_env

PREFIX = "/zk-recipes"


def _slow(where: Path, tag: str, *extra: str) -> list[str]:
    return ["slowcmd", "--dir", str(where), "--tag", tag, *extra]


def _started(where: Path, tag: str) -> bool:
    return (where / f"{tag}.started").exists()


def _children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def test_two_no_wait_runs_one_runs_the_other_is_busy_and_never_runs(
    manage: Manage, tmp_path: Path, zk_client: ZkClient
) -> None:
    first = manage.popen(["zklock", "demo", "--", *_slow(tmp_path, "A")])
    wait_until(lambda: _started(tmp_path, "A"), "A runs", timeout=30)
    second = manage.run(["zklock", "demo", "--no-wait", "--", *_slow(tmp_path, "B")])
    assert second.returncode == ExitCode.BUSY, second.stderr
    assert first.poll() is None  # busy while the holder still runs: no waiting
    assert not _started(tmp_path, "B")
    assert "lock demo is held by" in second.stderr
    assert "slowcmd" in second.stderr
    (tmp_path / "go").touch()
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert "slowcmd A done" in out
    assert _children(zk_client, lock_path("demo", PREFIX)) == []  # released at once


def test_timeout_serialises_behind_the_holder_or_gives_the_timeout_code(
    manage: Manage, tmp_path: Path
) -> None:
    first = manage.popen(["zklock", "demo", "--", *_slow(tmp_path, "A")])
    wait_until(lambda: _started(tmp_path, "A"), "A runs", timeout=30)
    gives_up = manage.run(["zklock", "demo", "--timeout", "0.5", "--", *_slow(tmp_path, "B")])
    assert gives_up.returncode == ExitCode.TIMED_OUT, gives_up.stderr
    assert "still held after 0.5s" in gives_up.stderr
    waits = manage.popen(["zklock", "demo", "--timeout", "30", "--", *_slow(tmp_path, "C")])
    time.sleep(0.5)
    assert not _started(tmp_path, "C")  # queued behind A
    (tmp_path / "go").touch()
    assert waits.wait(30) == 0
    assert first.wait(30) == 0
    # C started only after A ended.
    assert (tmp_path / "A.ended").stat().st_mtime_ns <= (tmp_path / "C.started").stat().st_mtime_ns
    assert not _started(tmp_path, "B")


def test_the_commands_own_failure_is_the_exit_code(manage: Manage, tmp_path: Path) -> None:
    (tmp_path / "go").touch()
    run = manage.run(["zklock", "demo", "--", *_slow(tmp_path, "A", "--code", "3")])
    assert run.returncode == 3
    assert "CommandError: slowcmd failed on purpose with 3" in run.stderr
    child = manage.run(["zklock", "demo", "--exec", "--", "sh", "-c", "exit 4"])
    assert child.returncode == 4


def test_bad_input_has_its_exit_code_and_takes_no_lock(
    manage: Manage, tmp_path: Path, zk_client: ZkClient
) -> None:
    no_command = manage.run(["zklock", "demo"])
    assert no_command.returncode == ExitCode.USAGE
    assert "give one after --" in no_command.stderr
    unknown = manage.run(["zklock", "demo", "--", "nosuchcommand"])
    assert unknown.returncode == ExitCode.NOT_FOUND
    assert "use --exec to run a program" in unknown.stderr
    missing = manage.run(["zklock", "demo", "--exec", "--", str(tmp_path / "missing")])
    assert missing.returncode == ExitCode.NOT_FOUND
    both = manage.run(["zklock", "demo", "--no-wait", "--timeout", "3", "--", "check"])
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    assert _children(zk_client, lock_path("demo", PREFIX)) == []


_BAD_ARGUMENTS = [
    (["zklock", "../x", "--", "check"], "lock name '../x': its path"),
    (["zklock", "", "--", "check"], "a lock name must be"),
    (["zklock", "/zookeeper/x", "--", "check"], "is reserved by ZooKeeper"),
    (["zklock", "a\x01b", "--", "check"], "ZooKeeper does not allow"),
    (["zkleader", "../x", "--", "check"], "leader name '../x': its path"),
    (["zklock", "demo", "--timeout", "nan", "--", "check"], "--timeout must be a finite"),
    (["zklock", "demo", "--timeout", "-1", "--", "check"], "--timeout must be a finite"),
    (["zklock", "demo", "--grace", "inf", "--", "check"], "--grace must be a finite"),
    (["zkleader", "demo", "--grace", "soon", "--", "check"], "--grace must be a number"),
    (["zkstatus", "--path", "notabs"], "--path 'notabs' is relative"),
    (["zkstatus", "--path", "/a/"], "drop the trailing slash"),
    (["lockedcmd", "--timeout", "nan", "--dir", "."], "--timeout must be a finite"),
]


@pytest.mark.parametrize(
    ("args", "says"), _BAD_ARGUMENTS, ids=[" ".join(a[:3]) for a, _ in _BAD_ARGUMENTS]
)
def test_a_bad_argument_is_one_line_and_exit_2_before_connecting(
    manage: Manage, zk_client: ZkClient, args: list[str], says: str
) -> None:
    run = manage.run(args)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert says in lines[0]
    assert zk_client.get_children("/") == []  # nothing connected and made a node


def test_an_unknown_command_after_the_dashes_gets_a_did_you_mean(manage: Manage) -> None:
    run = manage.run(["zklock", "demo", "--", "migarte"])
    assert run.returncode == ExitCode.NOT_FOUND, run.stderr
    assert "unknown management command 'migarte' (did you mean 'migrate'?)" in run.stderr
    far = manage.run(["zkleader", "demo", "--", "zzqqxx"])
    assert far.returncode == ExitCode.NOT_FOUND, far.stderr
    assert "did you mean" not in far.stderr


def test_unreachable_zookeeper_and_bad_settings_have_their_codes(
    zk_hosts: str, zk_namespace: str
) -> None:
    (port,) = free_ports(1)
    closed = Manage(manage_env(f"127.0.0.1:{port}", zk_namespace))
    # The site asks for a 5 s connection timeout: that is the bound of the wait.
    run = closed.run(["zklock", "demo", "--", "check"])
    assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
    assert f"127.0.0.1:{port}" in run.stderr
    bad = Manage(manage_env(zk_hosts, zk_namespace, ZK_SESSION_TIMEOUT="-1"))
    run = bad.run(["zklock", "demo", "--skip-checks", "--", "check"])
    assert run.returncode == ExitCode.CONFIG, run.stderr
    assert 'ZK_RECIPES["default"]["SESSION_TIMEOUT"]' in run.stderr


def test_zkstatus_of_an_unreachable_ensemble_says_why_and_no_kazoo_line(
    zk_namespace: str,
) -> None:
    (port,) = free_ports(1)
    closed = Manage(manage_env(f"127.0.0.1:{port}", zk_namespace))
    run = closed.run(["zkstatus", "--skip-checks"])
    assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
    assert "unreachable: no connection to ZooKeeper" in run.stdout
    assert "Connection refused" in run.stdout
    # kazoo's own line per attempt is DEBUG: nothing of it without -v.
    assert "Connection dropped" not in run.stderr
    assert "kazoo" not in run.stderr


@pytest.mark.slow
def test_exec_child_is_terminated_when_the_session_is_lost(
    zk_proxy: TcpProxy, zk_namespace: str, tmp_path: Path
) -> None:
    manage = Manage(manage_env(zk_proxy.connect_string, zk_namespace))
    script = f"trap '' TERM; echo $$ > {tmp_path}/pid; while true; do sleep 0.05; done"
    run = manage.popen(["zklock", "demo", "--exec", "--grace", "0.5", "--", "sh", "-c", script])
    try:
        pid = written_int(tmp_path / "pid", "the program runs", timeout=30)
        zk_proxy.blackhole()  # the server hears nothing more: the session expires there
        _, err = run.communicate(timeout=SESSION_TIMEOUT + 20)
        assert run.returncode == ExitCode.LOST, err
        assert "was lost while sh" in err
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        if run.poll() is None:
            run.kill()


@pytest.mark.slow
def test_in_process_command_is_interrupted_when_the_session_is_lost(
    zk_proxy: TcpProxy, zk_namespace: str, tmp_path: Path
) -> None:
    manage = Manage(manage_env(zk_proxy.connect_string, zk_namespace))
    run = manage.popen(["zklock", "demo", "--", *_slow(tmp_path, "A")])
    try:
        wait_until(lambda: _started(tmp_path, "A"), "A runs", timeout=30)
        zk_proxy.blackhole()
        _, err = run.communicate(timeout=SESSION_TIMEOUT + 20)
        assert run.returncode == ExitCode.LOST, err
        assert "raising LockLost in it" in err
        assert not (tmp_path / "A.ended").exists()  # interrupted inside its wait
    finally:
        if run.poll() is None:
            run.kill()


@pytest.mark.slow
def test_a_command_that_swallows_the_loss_ends_with_the_process(
    zk_proxy: TcpProxy, zk_namespace: str, tmp_path: Path
) -> None:
    manage = Manage(manage_env(zk_proxy.connect_string, zk_namespace))
    argv = ["zklock", "demo", "--grace", "0.5", "--", "stubborncmd", "--dir", str(tmp_path)]
    run = manage.popen(argv)
    try:
        wait_until(lambda: (tmp_path / "stubborn.started").exists(), "it runs", timeout=30)
        zk_proxy.blackhole()
        _, err = run.communicate(timeout=SESSION_TIMEOUT + 20)
        assert run.returncode == ExitCode.LOST, err
        assert (tmp_path / "stubborn.caught").read_text() == "LockLost"
        assert "exiting now" in err
    finally:
        if run.poll() is None:
            run.kill()


@pytest.mark.slow
def test_zkleader_standby_takes_over_after_kill_9_of_the_leader(
    manage: Manage, tmp_path: Path
) -> None:
    runs = {}
    for tag in ("A", "B"):
        runs[tag] = manage.popen(
            ["zkleader", "consumer", "--", *_slow(tmp_path, tag)], start_new_session=True
        )
        if tag == "A":
            wait_until(lambda: _started(tmp_path, "A"), "A leads", timeout=30)
    time.sleep(0.5)
    assert not _started(tmp_path, "B")  # B stands by
    os.killpg(runs["A"].pid, signal.SIGKILL)
    runs["A"].wait(10)
    # Within the session timeout, plus the time to notice and start.
    wait_until(lambda: _started(tmp_path, "B"), "B took over", timeout=SESSION_TIMEOUT + 3.0)
    (tmp_path / "go").touch()
    assert runs["B"].wait(30) == 0


def test_zkstatus_json_shows_the_connection_and_the_holder(manage: Manage, tmp_path: Path) -> None:
    holder = manage.popen(["zklock", "report", "--", *_slow(tmp_path, "A")])
    wait_until(lambda: _started(tmp_path, "A"), "A runs", timeout=30)
    run = manage.run(["zkstatus", "--json"])
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)["aliases"]["default"]
    assert report["connection"]["state"] == "CONNECTED"
    assert report["connection"]["negotiated_session_timeout"] == SESSION_TIMEOUT
    (lock,) = [r for r in report["holders"] if r["path"] == lock_path("report", PREFIX)]
    (node,) = lock["holders"]
    assert node["holding"]
    assert node["pid"] == holder.pid
    assert node["id"].startswith("manage.py slowcmd")
    assert node["fencing_token"] > 0
    text = manage.run(["zkstatus"])
    assert text.returncode == 0
    assert "CONNECTED" in text.stdout
    assert "report" in text.stdout
    (tmp_path / "go").touch()
    assert holder.wait(30) == 0


def test_locked_command_waits_its_turn_or_is_busy(manage: Manage, tmp_path: Path) -> None:
    first = manage.popen(["lockedcmd", "--dir", str(tmp_path), "--tag", "A"])
    wait_until(lambda: _started(tmp_path, "A"), "A runs", timeout=30)
    busy = manage.run(["lockedcmd", "--dir", str(tmp_path), "--tag", "B", "--no-wait"])
    assert busy.returncode == ExitCode.BUSY, busy.stderr
    timed_out = manage.run(["lockedcmd", "--dir", str(tmp_path), "--tag", "B", "--timeout", "0.3"])
    assert timed_out.returncode == ExitCode.TIMED_OUT, timed_out.stderr
    assert not _started(tmp_path, "B")
    (tmp_path / "go").touch()
    assert first.wait(30) == 0
    again = manage.run(["lockedcmd", "--dir", str(tmp_path), "--tag", "C", "--no-wait"])
    assert again.returncode == 0, again.stderr
    assert "slowcmd C done" in again.stdout


def test_call_command_maps_outcomes_to_command_error_returncodes(
    zk_settings: dict[str, Any],
    zk_client_factory: ClientFactory,
    zk_namespace: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "go").touch()
    call_command("zklock", "demo", "--", *_slow(tmp_path, "A"))
    assert (tmp_path / "A.ended").exists()
    with pytest.raises(CommandError) as failed:
        call_command("zklock", "demo", "--", *_slow(tmp_path, "B", "--code", "5"))
    assert failed.value.returncode == 5
    other = zk_client_factory(namespace=zk_namespace)
    held = Lock(other, lock_path("demo", PREFIX), identifier="another host")
    assert held.acquire()
    try:
        with pytest.raises(CommandError) as busy:
            call_command("zklock", "demo", "--no-wait", "--", *_slow(tmp_path, "C"))
        assert busy.value.returncode == ExitCode.BUSY
    finally:
        held.release()
    assert not _started(tmp_path, "C")
    report = Lock(other, lock_path("nightly-report", PREFIX), identifier="another host")
    assert report.acquire()
    try:
        with pytest.raises(CommandError) as locked_busy:
            call_command("lockedcmd", "--dir", str(tmp_path), "--tag", "D", zk_lock_no_wait=True)
        assert locked_busy.value.returncode == ExitCode.BUSY
    finally:
        report.release()
    call_command("lockedcmd", "--dir", str(tmp_path), "--tag", "D", zk_lock_no_wait=True)
    assert (tmp_path / "D.ended").exists()


# -- faces under failure: the outage rule, the command's process group ----------------


def test_a_silent_zookeeper_gives_69_within_the_timeout_never_busy(
    zk_proxy: TcpProxy, zk_namespace: str, tmp_path: Path
) -> None:
    env = manage_env(zk_proxy.connect_string, zk_namespace, ZK_CONNECTION_TIMEOUT="20")
    manage = Manage(env)
    zk_proxy.blackhole()  # connections are accepted, and nothing ever answers
    try:
        for args in (
            ["zklock", "demo", "--timeout", "1", "--", *_slow(tmp_path, "A")],
            ["zklock", "demo", "--timeout", "1", "--exec", "--", "true"],
            ["lockedcmd", "--dir", str(tmp_path), "--tag", "B", "--timeout", "1"],
        ):
            began = time.monotonic()
            run = manage.run(args)
            took = time.monotonic() - began
            assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
            assert "unreachable" in run.stderr
            assert "busy" not in run.stderr
            # --timeout 1 (plus the process's start-up), not the 20 s connection timeout.
            assert took < 10, (args, took)
    finally:
        zk_proxy.heal()
    assert not _started(tmp_path, "A")
    assert not _started(tmp_path, "B")


def test_no_wait_against_a_closed_port_gives_69_once_every_server_refused(
    zk_namespace: str, tmp_path: Path
) -> None:
    """Not after the 60 s connection timeout: nothing listens, nothing comes of waiting."""
    hosts = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))
    manage = Manage(manage_env(hosts, zk_namespace, ZK_CONNECTION_TIMEOUT="60"))
    for args in (
        ["zklock", "demo", "--no-wait", "--", *_slow(tmp_path, "A")],
        ["lockedcmd", "--dir", str(tmp_path), "--tag", "B", "--no-wait"],
    ):
        began = time.monotonic()
        run = manage.run(args)
        took = time.monotonic() - began
        assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
        assert "refused the connection" in run.stderr
        assert took < 30, (args, took)
    assert not _started(tmp_path, "A")
    assert not _started(tmp_path, "B")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_kill_9_of_zklock_exec_takes_the_programs_group_with_it(
    manage: Manage, tmp_path: Path, zk_client: ZkClient
) -> None:
    script = 'sleep 60 & echo $$ > "$1/group"; sleep 61'
    run = manage.popen(["zklock", "demo", "--exec", "--", "sh", "-c", script, "A", str(tmp_path)])
    group = written_int(tmp_path / "group", "the program runs", timeout=30)
    wait_until(lambda: len(live_in_group(group)) == 3, "sh and its two sleeps", timeout=10)
    run.kill()  # SIGKILL
    run.communicate(timeout=30)
    wait_until(lambda: not live_in_group(group), "the program's group gone", timeout=5)
