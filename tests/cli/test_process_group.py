"""The command's process group, with the ``zk-recipes`` command as users run it: real processes.

Commands here fork (``sh -c 'sleep 60 & ...'``), as shell scripts do. What is
checked: nothing of a command's group outlives its supervisor (``kill -9``
included) or its hold, the next holder's own command sees that for itself,
a Ctrl-C typed at a terminal reaches the command once, and ``holders``
names the command's pid and group.

Processes are read from /proc: a process counts as alive unless it is gone or
a zombie (an orphan's zombie stays until its new parent reaps it, which a
container's PID 1 may never do).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import CliRun, live_in_group
from zk_recipes import Lock, NoNodeError, ZkClient
from zk_recipes.cli import ExitCode
from zk_recipes.frameworks import leader_path, lock_path
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

# A command that forks, as a shell script does: a background sleep beside a foreground one.
# It records its group (its own pid: the group's leader) and that it runs.
_FORKING = 'sleep 60 & echo $$ > "$1/$0.group"; touch "$1/running-$0"; sleep 61'

# The next holder's command: it records which processes of the first command's group live
# when it starts, then ends.
_LOOK = r"""
import os, pathlib, sys
here, tag, other = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
group = int((here / f"{other}.group").read_text())
live = []
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            live.append(int(name))
(here / f"{tag}.saw").write_text(repr(live))
(here / f"running-{tag}").touch()
"""

# Counts the SIGINTs it gets; ends a second after the first, with 100 + the count.
_COUNT_INTS = r"""
import os, pathlib, signal, sys, time
here = pathlib.Path(sys.argv[1])
count = 0
def on_int(*_):
    global count
    count += 1
signal.signal(signal.SIGINT, on_int)
foreground = os.tcgetpgrp(0) if os.isatty(0) else -1
(here / "ready.tmp").write_text(f"{os.getpgrp()} {foreground}")
(here / "ready.tmp").rename(here / "ready")  # whole, or not there: the test reads it at once
deadline = time.monotonic() + 30
while not count and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(1.0)  # a second copy of the Ctrl-C would arrive meanwhile
sys.exit(100 + count)
"""

# Makes the pseudo-terminal on stdin the controlling terminal of this new session, then
# runs the rest: as a terminal emulator starts a shell.
_ON_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def _forking(tag: str, where: Path) -> list[str]:
    return ["sh", "-c", _FORKING, tag, str(where)]


def _look(tag: str, other: str, where: Path) -> list[str]:
    return [sys.executable, "-c", _LOOK, str(where), tag, other]


def _group_of(tag: str, where: Path) -> int:
    wait_until(lambda: (where / f"running-{tag}").exists(), f"{tag} runs", timeout=20)
    return int((where / f"{tag}.group").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["leader", "lock"])
def test_kill_9_of_the_supervisor_takes_its_command_and_its_children_with_it(
    kind: str,
    cli_env: dict[str, str],
    zk_client: ZkClient,
    tmp_path: Path,
    cli_runs: list[CliRun],
) -> None:
    first = CliRun([kind, "job", "--", *_forking("A", tmp_path)], cli_env)
    cli_runs.append(first)
    group = _group_of("A", tmp_path)
    # sh, and its two sleeps (the second may still be forking when the file appears)
    wait_until(lambda: len(live_in_group(group)) == 3, "sh and its two sleeps", timeout=10)
    second = CliRun([kind, "job", "--", *_look("B", "A", tmp_path)], cli_env)
    cli_runs.append(second)
    path = leader_path("job") if kind == "leader" else lock_path("job")
    wait_until(lambda: len(zk_client.get_children(path)) == 2, "B waits its turn", timeout=20)

    os.kill(first.process.pid, signal.SIGKILL)  # the pid `holders` shows, as an operator would
    first.wait()
    # The command and its children go at once, not at the session's expiry...
    wait_until(lambda: not live_in_group(group), "A's command gone", timeout=5)
    # ...and the standby's command saw none of them when it started.
    code, _, err = second.wait()
    assert code == 0, err
    assert (tmp_path / "B.saw").read_text() == "[]"


@pytest.mark.slow
def test_a_lost_lock_stops_the_whole_group_before_anyone_else_holds(
    cli_env: dict[str, str],
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
    cli_runs: list[CliRun],
) -> None:
    env = dict(cli_env, ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_SESSION_TIMEOUT="2")
    # A grandchild that ignores SIGTERM (and so do its sleeps): only SIGKILL ends it.
    script = (
        'sh -c "trap \\"\\" TERM; while :; do sleep 0.05; done" & echo $$ > "$1/A.group"; '
        'touch "$1/running-A"; wait'
    )
    run = CliRun(
        ["lock", "job", "--grace", "0.3", "--", "sh", "-c", script, "A", str(tmp_path)], env
    )
    cli_runs.append(run)
    group = _group_of("A", tmp_path)
    wait_until(lambda: len(live_in_group(group)) >= 3, "the grandchild runs", timeout=10)
    rival = Lock(zk_client_factory(hosts=zk_private_server.connect_string), lock_path("job"))
    try:
        zk_proxy.blackhole()  # the server hears nothing more: the session expires there
        assert rival.acquire(timeout=20)
        # The server gave the lock away: nothing of the group may live by now.
        assert live_in_group(group) == []
        code, _, err = run.wait()
    finally:
        zk_proxy.heal()
    assert code == ExitCode.LOST, err
    assert f"stopping its process group {group}" in err
    assert live_in_group(group) == []
    rival.release()


def test_ctrl_c_at_the_terminal_reaches_the_command_once(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    master, terminal = os.openpty()
    command = [sys.executable, "-c", _COUNT_INTS, str(tmp_path)]
    argv = [sys.executable, "-m", "zk_recipes", "lock", "job", "--", *command]
    process = subprocess.Popen(
        [sys.executable, "-c", _ON_TERMINAL, *argv],
        env=cli_env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    seen: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, seen), daemon=True)
    reader.start()
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), "the command runs", timeout=20)
        group, foreground = (int(n) for n in (tmp_path / "ready").read_text().split())
        # The command's own group has the terminal while it runs, as a shell's job has.
        assert foreground == group
        assert group != process.pid
        os.write(master, b"\x03")  # Ctrl-C
        assert process.wait(30) == 101, b"".join(seen)  # the command's status: one SIGINT
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(5)
        os.close(master)


def _drain(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        into.append(chunk)


def test_holders_names_the_commands_pid_and_group_and_a_leaders_since_is_a_bound(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    locked = CliRun(["lock", "job", "--", *_forking("L", tmp_path)], cli_env)
    leading = CliRun(["leader", "beat", "--", *_forking("E", tmp_path)], cli_env)
    cli_runs.extend([locked, leading])
    lock_group, leader_group = _group_of("L", tmp_path), _group_of("E", tmp_path)

    def report() -> dict[str, dict[str, Any]]:
        out = subprocess.run(
            [sys.executable, "-m", "zk_recipes", "holders", "--json"],
            env=cli_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {r["path"]: r["holders"][0] for r in json.loads(out) if r["holders"]}

    # The lock's node is given the command after it starts: wait for that one write.
    wait_until(lambda: report()[lock_path("job")]["command_pid"] is not None, "recorded", 10)
    holders = report()
    lock_holder, leader = holders[lock_path("job")], holders[leader_path("beat")]
    assert lock_holder["pid"] == locked.process.pid
    assert lock_holder["command_pid"] == lock_holder["command_pgid"] == lock_group
    assert lock_holder["since_exact"] is True  # when the hold began: the node records it
    assert leader["pid"] == leading.process.pid
    assert leader["command_pid"] == leader["command_pgid"] == leader_group
    assert leader["since_exact"] is False  # it joined then; it leads since then or later
    table = subprocess.run(
        [sys.executable, "-m", "zk_recipes", "holders"],
        env=cli_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"{locked.process.pid} (command {lock_group}, group {lock_group})" in table
    (leader_row,) = [line for line in table.splitlines() if line.startswith(leader_path("beat"))]
    assert f"(command {leader_group}, group {leader_group})" in leader_row
    assert " ≤" in leader_row
    for run in (locked, leading):
        run.process.send_signal(signal.SIGTERM)  # passed on to the whole group
        assert run.wait()[0] == 128 + signal.SIGTERM
    assert live_in_group(lock_group) == live_in_group(leader_group) == []


def test_a_standby_names_the_leader_and_how_long_it_leads_at_most(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    leading = CliRun(["leader", "beat", "--", *_forking("E", tmp_path)], cli_env)
    cli_runs.append(leading)
    _group_of("E", tmp_path)
    standby = CliRun(["leader", "beat", "--", *_forking("S", tmp_path)], cli_env)
    cli_runs.append(standby)
    assert standby.process.stderr is not None
    line = standby.process.stderr.readline()
    assert line.startswith("zk-recipes: waiting for leadership of beat: held by "), line
    assert f":{leading.process.pid} (sh -c " in line
    assert ", for at most " in line  # its node says when it joined, not when it began to lead
    for run in (standby, leading):
        run.process.send_signal(signal.SIGTERM)
        run.wait()


def test_what_the_command_leaves_in_its_group_is_stopped_before_the_lock_goes(
    cli_env: dict[str, str], zk_client: ZkClient, tmp_path: Path
) -> None:
    script = 'sleep 60 & echo $$ > "$1/A.group"; exit 3'
    started_at = time.monotonic()
    code, _, err = CliRun(
        ["lock", "job", "--", "sh", "-c", script, "A", str(tmp_path)], cli_env
    ).wait()
    assert code == 3, err  # the command's own status
    group = int((tmp_path / "A.group").read_text())
    assert live_in_group(group) == []
    assert f"left processes running in its group {group}: stopped them" in err
    try:  # the lock's directory is a container: the server may reap it at any moment
        left = zk_client.get_children(lock_path("job"))
    except NoNodeError:
        left = []
    assert left == []
    assert time.monotonic() - started_at < 30  # a generous bound: no hang


def test_the_busy_line_names_the_whole_command(
    cli_env: dict[str, str], zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"), identifier="nightly backup")
    assert holder.acquire()
    argv = ["sh", "-c", "echo never", "with spaces"]
    code, _, err = CliRun(["lock", "job", "--no-wait", "--", *argv], cli_env).wait()
    assert code == ExitCode.BUSY
    assert "(nightly backup), for " in err
    assert err.rstrip().endswith(f"not running {shlex.join(argv)}"), err
    holder.release()


def test_stopping_a_standbys_command_group_ends_the_standby_without_running_it(
    cli_env: dict[str, str], tmp_path: Path, cli_runs: list[CliRun]
) -> None:
    leading = CliRun(["leader", "beat", "--", *_forking("E", tmp_path)], cli_env)
    cli_runs.append(leading)
    _group_of("E", tmp_path)
    standby = CliRun(["leader", "beat", "--", *_forking("S", tmp_path)], cli_env)
    cli_runs.append(standby)

    def waiting() -> list[dict[str, Any]]:
        out = subprocess.run(
            [sys.executable, "-m", "zk_recipes", "holders", "--json"],
            env=cli_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (election,) = [r for r in json.loads(out) if r["path"] == leader_path("beat")]
        return list(election["waiting"])

    wait_until(lambda: len(waiting()) == 1, "the standby's node", timeout=20)
    (node,) = waiting()
    assert node["pid"] == standby.process.pid
    os.killpg(node["command_pgid"], signal.SIGTERM)  # the group holders names, before it ran
    code, _, err = standby.wait()
    assert code == 128 + signal.SIGTERM, err
    assert "was stopped before it ran" in err
    assert not (tmp_path / "running-S").exists()
    leading.process.send_signal(signal.SIGTERM)
    leading.wait()
