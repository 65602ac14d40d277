"""The lock-guarded run and the cold standby, in process: real ZooKeeper, real child processes.

``run_locked`` / ``run_as_leader`` run here on a test thread (so no signal
relay: that is covered through the command line in tests/cli/test_cli.py), with
children that report what happened to them through files.
"""

from __future__ import annotations

import io
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zk_recipes import Lock, LockLost, NoNodeError, Owner, ZkClient
from zk_recipes.cli import ExitCode, run_as_leader, run_locked
from zk_recipes.frameworks import leader_path, lock_path
from zk_recipes.testing import expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

# A child that records its pid, then waits for a "go" file (or a long time).
_CHILD = """
import os, pathlib, signal, sys, time
here = pathlib.Path(sys.argv[1])
if sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif sys.argv[2] == "note-term":
    def on_term(*_):
        (here / "got-term").write_text("yes")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
(here / "pid.tmp").write_text(str(os.getpid()))
os.replace(here / "pid.tmp", here / "pid")  # whole when it appears: tests read it at once
deadline = time.monotonic() + 60
while not (here / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
sys.exit(int(sys.argv[3]))
"""


def _child(where: Path, mode: str = "plain", code: int = 0) -> list[str]:
    where.mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-c", _CHILD, str(where), mode, str(code)]


class _Run:
    """``run_locked`` / ``run_as_leader`` on a thread; ``code`` once it returned."""

    def __init__(self, target: Callable[[io.StringIO], int]) -> None:
        self.out = io.StringIO()
        self.code: int | None = None
        self._thread = threading.Thread(target=self._run, args=(target,), daemon=True)
        self._thread.start()

    def _run(self, target: Callable[[io.StringIO], int]) -> None:
        self.code = target(self.out)

    def wait(self, timeout: float = 30.0) -> int:
        self._thread.join(timeout)
        assert self.code is not None, f"the run did not end: {self.out.getvalue()}"
        return self.code


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes: our own children are reaped by Popen.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _nodes(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # a CONTAINER parent goes once it is empty
        return []


def test_the_command_runs_holding_the_lock_and_its_status_is_returned(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    runner, observer = zk_client_factory(), zk_client_factory()
    argv = _child(tmp_path / "a", code=3)
    run = _Run(lambda out: run_locked(runner, "job", argv, out=out))
    wait_until(lambda: (tmp_path / "a" / "pid").exists(), "the command started")

    contenders = Lock(observer, lock_path("job")).contenders()
    assert len(contenders) == 1
    assert contenders[0].is_holder
    owner = contenders[0].owner
    # The owner data names the command line, this host, the runner's pid and the start time.
    assert owner.id == shlex.join(argv)
    assert owner.host == socket.gethostname()
    assert owner.pid == os.getpid()
    assert owner.since is not None

    (tmp_path / "a" / "go").write_text("")
    assert run.wait() == 3
    # Released when the command ended: the node is gone, with the session still open.
    assert _nodes(observer, lock_path("job")) == []
    assert runner.state is not None
    assert runner.state.value == "CONNECTED"


def test_no_wait_gives_busy_and_never_runs_the_command(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"), identifier="nightly backup")
    assert holder.acquire()
    out = io.StringIO()
    code = run_locked(zk_client_factory(), "job", _child(tmp_path / "b"), wait=False, out=out)
    assert code == ExitCode.BUSY
    assert not (tmp_path / "b" / "pid").exists()
    assert f"{socket.gethostname()}:{os.getpid()} (nightly backup)" in out.getvalue()
    holder.release()


def test_timeout_gives_timed_out_or_runs_once_the_holder_lets_go(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"))
    assert holder.acquire()
    code = run_locked(zk_client_factory(), "job", _child(tmp_path / "c"), timeout=0.5)
    assert code == ExitCode.TIMED_OUT
    assert not (tmp_path / "c" / "pid").exists()

    run = _Run(
        lambda out: run_locked(zk_client_factory(), "job", _child(tmp_path / "d"), timeout=20)
    )
    wait_until(lambda: len(_nodes(holder.client, lock_path("job"))) == 2, "the run queued")
    assert not (tmp_path / "d" / "pid").exists()
    holder.release()
    wait_until(lambda: (tmp_path / "d" / "pid").exists(), "the command ran after the holder")
    (tmp_path / "d" / "go").write_text("")
    assert run.wait() == 0


def test_waiting_feedback_without_a_terminal_is_one_line_per_holder(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"), identifier="deploy")
    assert holder.acquire()
    run = _Run(
        lambda out: run_locked(
            zk_client_factory(), "job", _child(tmp_path / "e"), out=out, live=False
        )
    )
    wait_until(lambda: "waiting for lock job" in run.out.getvalue(), "the waiting line")
    # Several refreshes later there is still one line: no spam in a log file.
    threading.Event().wait(2.5)
    lines = [line for line in run.out.getvalue().splitlines() if "waiting" in line]
    assert len(lines) == 1, lines
    assert f"held by {socket.gethostname()}:{os.getpid()} (deploy)" in lines[0]
    assert "we are 2nd of 2 in line" in lines[0]
    holder.release()
    wait_until(lambda: (tmp_path / "e" / "pid").exists(), "the command ran")
    (tmp_path / "e" / "go").write_text("")
    assert run.wait() == 0


def test_waiting_feedback_on_a_terminal_redraws_one_line(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"))
    assert holder.acquire()
    run = _Run(
        lambda out: run_locked(
            zk_client_factory(), "job", _child(tmp_path / "f"), out=out, live=True
        )
    )
    wait_until(lambda: run.out.getvalue().count("\r\x1b[K") >= 3, "three redraws", timeout=15)
    assert "\n" not in run.out.getvalue()  # redrawn in place, never a new line
    holder.release()
    wait_until(lambda: (tmp_path / "f" / "pid").exists(), "the command ran")
    (tmp_path / "f" / "go").write_text("")
    assert run.wait() == 0
    assert run.out.getvalue().endswith("\r\x1b[K")  # the status line is wiped once it is ours


def test_a_signal_death_is_reported_as_a_shell_does(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    code = run_locked(zk_client_factory(), "job", [sys.executable, "-c", "import os; os.abort()"])
    assert code == 128 + signal.SIGABRT


def test_a_missing_command_gives_127_and_frees_the_lock(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    client = zk_client_factory()
    out = io.StringIO()
    code = run_locked(client, "job", [str(tmp_path / "no-such-program")], out=out)
    assert code == ExitCode.NOT_FOUND
    assert "command not found" in out.getvalue()
    assert _nodes(client, lock_path("job")) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["note-term", "ignore-term"])
def test_session_expiry_stops_the_command_and_gives_lost(
    zk_client_factory: ClientFactory, tmp_path: Path, mode: str
) -> None:
    runner = zk_client_factory()
    where = tmp_path / mode
    run = _Run(lambda out: run_locked(runner, "job", _child(where, mode), grace=0.5, out=out))
    wait_until(lambda: (where / "pid").exists(), "the command started")
    pid = int((where / "pid").read_text())
    expire_session(runner)

    assert run.wait() == ExitCode.LOST
    assert not _alive(pid)
    assert "was lost while" in run.out.getvalue()
    # SIGTERM first: a command that listens to it ends cleanly; one that ignores it is killed.
    assert (where / "got-term").exists() == (mode == "note-term")


def test_a_standby_runs_the_command_only_while_it_leads(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    first_client, second_client = zk_client_factory(), zk_client_factory()
    first = _Run(lambda out: run_as_leader(first_client, "beat", _child(tmp_path / "1"), out=out))
    wait_until(lambda: (tmp_path / "1" / "pid").exists(), "the leader runs the command")
    second = _Run(
        lambda out: run_as_leader(
            second_client, "beat", _child(tmp_path / "2"), grace=0.5, out=out, live=False
        )
    )
    wait_until(lambda: len(_nodes(first_client, leader_path("beat"))) == 2, "a standby")
    wait_until(lambda: "waiting for leadership of beat" in second.out.getvalue(), "standby line")
    assert not (tmp_path / "2" / "pid").exists()

    # The leader's node carries its owner data: host, pid and command line.
    nodes = sorted(_nodes(first_client, leader_path("beat")), key=lambda n: n[-10:])
    data, _ = first_client.get(f"{leader_path('beat')}/{nodes[0]}")
    owner = Owner.from_bytes(data)
    assert owner.pid == os.getpid()
    assert owner.id == shlex.join(_child(tmp_path / "1"))

    # The leader's command ends: its status is the run's, and leadership passes on.
    (tmp_path / "1" / "go").write_text("")
    assert first.wait() == 0
    wait_until(lambda: (tmp_path / "2" / "pid").exists(), "the standby took over")

    # The new leader's session expires: its command is stopped and the run says LOST.
    pid = int((tmp_path / "2" / "pid").read_text())
    expire_session(second_client)
    assert second.wait() == ExitCode.LOST
    assert not _alive(pid)


@pytest.mark.slow
def test_rejoin_stands_by_again_after_losing_leadership(
    zk_client_factory: ClientFactory, tmp_path: Path
) -> None:
    client = zk_client_factory()
    where = tmp_path / "r"
    run = _Run(
        lambda out: run_as_leader(client, "beat", _child(where, "note-term"), rejoin=True, out=out)
    )
    wait_until(lambda: (where / "pid").exists(), "the command runs")
    first_pid = int((where / "pid").read_text())
    (where / "pid").unlink()
    expire_session(client)
    # Stopped, then run anew once the new session leads again.
    wait_until(lambda: (where / "pid").exists(), "the command runs again", timeout=20)
    assert not _alive(first_pid)
    assert (where / "got-term").exists()
    assert "standing by to lead beat again" in run.out.getvalue()
    (where / "go").write_text("")
    assert run.wait() == 0


# -- in-process commands (a callable instead of an argv) --------------------------


def test_a_callable_runs_in_process_holding_the_lock_and_returns_its_status(
    zk_client_factory: ClientFactory,
) -> None:
    runner, observer = zk_client_factory(), zk_client_factory()
    seen: list[bool] = []

    def job() -> int:
        (contender,) = Lock(observer, lock_path("job")).contenders()
        seen.append(contender.is_holder and contender.owner.pid == os.getpid())
        return 7

    assert run_locked(runner, "job", job, identifier="manage.py report") == 7
    assert seen == [True]
    assert _nodes(observer, lock_path("job")) == []
    assert run_locked(runner, "job", lambda: None) == 0  # None means success


def test_a_callable_is_not_called_when_busy_and_its_exceptions_propagate(
    zk_client_factory: ClientFactory,
) -> None:
    holder = Lock(zk_client_factory(), lock_path("job"))
    assert holder.acquire()
    called: list[int] = []
    out = io.StringIO()
    code = run_locked(zk_client_factory(), "job", lambda: called.append(1), wait=False, out=out)
    assert code == ExitCode.BUSY
    assert called == []
    holder.release()

    runner = zk_client_factory()

    def fails() -> int:
        raise ValueError("bad data")

    with pytest.raises(ValueError, match="bad data"):
        run_locked(runner, "job", fails)
    assert _nodes(runner, lock_path("job")) == []  # released on the way out


@pytest.mark.slow
def test_session_expiry_interrupts_a_callable_on_the_main_thread(
    zk_client_factory: ClientFactory,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    runner = zk_client_factory()
    started = threading.Event()
    interrupted: list[BaseException] = []

    def job() -> int:
        started.set()
        try:
            time.sleep(60)  # a blocking call: the signal breaks it
        except BaseException as exc:
            interrupted.append(exc)
            raise
        return 0

    threading.Thread(target=lambda: (started.wait(30), expire_session(runner)), daemon=True).start()
    out = io.StringIO()
    assert run_locked(runner, "job", job, out=out) == ExitCode.LOST
    assert [type(exc) for exc in interrupted] == [LockLost]
    assert "lost its hold while running" in out.getvalue()


@pytest.mark.slow
def test_session_expiry_interrupts_a_callable_on_another_thread(
    zk_client_factory: ClientFactory,
) -> None:
    runner = zk_client_factory()
    started = threading.Event()
    interrupted: list[BaseException] = []

    def job() -> int:
        started.set()
        try:
            for _ in range(3000):  # raised at its next instruction
                time.sleep(0.02)
        except BaseException as exc:
            interrupted.append(exc)
            raise
        return 0

    run = _Run(lambda out: run_locked(runner, "job", job, out=out))
    assert started.wait(30)
    expire_session(runner)
    assert run.wait() == ExitCode.LOST
    assert [type(exc) for exc in interrupted] == [LockLost]


def test_a_signal_while_a_callable_runs_interrupts_it_with_128_plus_n(
    zk_client_factory: ClientFactory,
) -> None:
    runner = zk_client_factory()
    interrupted: list[str] = []

    def job() -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
        except BaseException as exc:
            interrupted.append(type(exc).__name__)
            raise
        return 0

    assert run_locked(runner, "job", job, out=io.StringIO()) == 128 + signal.SIGTERM
    assert interrupted == ["Interrupted"]
    assert _nodes(runner, lock_path("job")) == []


@pytest.mark.slow
def test_a_leader_callable_runs_again_after_a_loss_with_rejoin(
    zk_client_factory: ClientFactory,
) -> None:
    runner = zk_client_factory()
    runs: list[int] = []

    def job() -> int:
        runs.append(1)
        if len(runs) == 1:
            threading.Thread(target=expire_session, args=(runner,), daemon=True).start()
            time.sleep(60)
        return 5

    code = run_as_leader(runner, "beat", job, rejoin=True, out=io.StringIO())
    assert code == 5
    assert len(runs) == 2
