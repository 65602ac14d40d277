"""Run a command while holding a lock, or while leader: one implementation for every face.

``zk-recipes lock``/``leader``, Django's ``zklock``/``zkleader`` and Flask's
``flask zk lock``/``leader`` all end here. The sequence of a run:

1. Queue for the lock (a ``Lock`` under ``<prefix>/locks/<name>``) or join the
   election (a ``LeaderLatch`` under ``<prefix>/leaders/<name>``, with the
   SESSION error policy: leadership ends when the session is LOST, which the
   client declares before the server can elect anyone else). The wait runs
   on a thread of its own so the main thread stays free for signals; a
   signal cancels it and the command never runs (exit 128 + N).
2. Start the command as a child process (``_child``), passing SIGINT,
   SIGTERM and SIGHUP on to it.
3. Watch two things at once: the child ending (its status becomes ours) and
   the hold ending. The hold is judged by ``Lock.check()`` /
   ``LeaderLatch.has_leadership()``, which answer from the client's loss
   epoch, and a state listener wakes the loop the moment LOST is published,
   so the child is told to stop (SIGTERM, then SIGKILL after the grace
   period) before the server hands the lock to anyone else. The default
   grace is the margin simulated expiry leaves: ``(1 - simulated_expiry_fraction)``
   times the negotiated session timeout.
4. Release at once when the child ends: the node is deleted, nobody waits
   for a session to expire.

The owner data of the node names the command line (as the identifier),
the host, the pid of this process and the start time; ``zk-recipes holders``
shows them.

Size: over the house limit (tests/test_module_sizes.py): ``run_locked`` and
``run_as_leader`` are two doors to one run (wait on a thread, run the child,
watch child and hold, release), and the run's steps share its signal relay
and wake event; the child process and the in-process call are modules of their own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from zk_recipes import (
    DEFAULT_PREFIX,
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    ErrorPolicy,
    LeaderLatch,
    Lock,
    LockLost,
    Owner,
    StateChange,
    ZkClient,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes.cli._child import Child, SignalRelay
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._in_process import Call, InProcess, describe
from zk_recipes.cli._waiting import QueueView, WaitReporter, describe_owner
from zk_recipes.frameworks import leader_path, lock_path

log = logging.getLogger("zk_recipes.cli")

_HOST = socket.gethostname()
_WAIT_THREAD = "zk-recipes guarded run"


def default_grace(client: ZkClient) -> float:
    """Seconds between SIGTERM and SIGKILL after a loss: the margin left before the server acts."""
    timeout = client.negotiated_session_timeout or client.settings.session_timeout
    return max(0.5, (1.0 - client.settings.simulated_expiry_fraction) * timeout)


def run_locked(
    client: ZkClient,
    name: str,
    command: Sequence[str] | Call,
    *,
    wait: bool = True,
    timeout: float | None = None,
    grace: float | None = None,
    prefix: str = DEFAULT_PREFIX,
    identifier: str | None = None,
    out: TextIO | None = None,
    live: bool | None = None,
    exit_process_on_lost: bool = False,
) -> int:
    """Run ``command`` while holding the lock ``name``; its exit code.

    ``command`` is a program's argv, run as a child process, or a callable run
    in this process on the calling thread (``_in_process``: its return value
    is the status; on a loss ``LockLost`` is raised in it, and with
    ``exit_process_on_lost`` the process exits if it still runs after
    ``grace``). ``client`` must be started. ``wait=False`` gives up at once when the lock
    is held (``ExitCode.BUSY``); ``timeout`` bounds the wait
    (``ExitCode.TIMED_OUT``). Messages for people go to ``out`` (stderr);
    ``live`` (default: ``out`` is a terminal) redraws a status line while
    waiting. See the module docstring and ``ExitCode`` for the rest.
    """
    out = sys.stderr if out is None else out
    job = _check_command(command)
    _check_timeout(timeout, wait)
    path = lock_path(name, prefix)
    lock = Lock(client, path, identifier=identifier or _label(job))
    what = f"lock {name}"
    wake = threading.Event()
    with SignalRelay(wake) as relay, _wake_on_state_change(client, wake):
        reporter = _reporter(out, what, lambda: _lock_view(lock), wait, live)
        outcome = _wait_for(
            lambda: lock.acquire(blocking=wait, timeout=timeout), relay, wake, reporter, lock.cancel
        )
        if isinstance(outcome, BaseException):
            return _failed(out, what, outcome)
        if relay.first is not None:
            if outcome:
                _release(lock)
            return _interrupted(out, what, relay.first)
        if not outcome:
            if not wait:
                _say(
                    out,
                    f"{what} is held by {_holder_text(lambda: _lock_view(lock))}; "
                    f"not running {_short(job)}",
                )
                return ExitCode.BUSY
            _say(out, f"{what} was still held after {timeout:g}s; not running {_short(job)}")
            return ExitCode.TIMED_OUT
        try:
            log.info(
                "holding %s (%s, fencing token %d): running %s",
                what,
                path,
                lock.fencing_token,
                _label(job),
            )
            return _run_command(
                out,
                what,
                job,
                relay,
                wake,
                _lock_is_ours(lock),
                _grace(client, grace),
                exit_process_on_lost,
            )
        finally:
            _release(lock)


def run_as_leader(
    client: ZkClient,
    name: str,
    command: Sequence[str] | Call,
    *,
    rejoin: bool = False,
    grace: float | None = None,
    prefix: str = DEFAULT_PREFIX,
    identifier: str | None = None,
    out: TextIO | None = None,
    live: bool | None = None,
    exit_process_on_lost: bool = False,
) -> int:
    """Wait as a standby for leadership of ``name``; run ``command`` only while leader.

    When leadership is lost the command is stopped (SIGTERM, SIGKILL after
    ``grace``) and the exit code is ``ExitCode.LOST``, or with ``rejoin`` the
    run stands by again and runs the command anew once it leads. The
    command's own exit ends the run with its status. ``client`` must be
    started; the other arguments are those of ``run_locked``.
    """
    out = sys.stderr if out is None else out
    job = _check_command(command)
    path = leader_path(name, prefix)
    owner = Owner.here(identifier or _label(job))
    latch = LeaderLatch(client, path, owner.to_bytes().decode(), error_policy=ErrorPolicy.SESSION)
    what = f"leadership of {name}"
    wake = threading.Event()
    latch.add_listener(_WakeListener(wake))
    with SignalRelay(wake) as relay, _wake_on_state_change(client, wake):
        try:
            latch.start()
        except ZkRecipesError as exc:
            return _failed(out, what, exc)
        try:
            while True:
                if not latch.has_leadership():
                    reporter = _reporter(out, what, lambda: _latch_view(latch), True, live)
                    with reporter:
                        while not latch.has_leadership() and relay.first is None:
                            wake.wait(0.5)
                            wake.clear()
                if relay.first is not None:
                    return _interrupted(out, what, relay.first)
                log.info("leading %s (%s): running %s", name, path, _label(job))
                status = _run_command(
                    out,
                    what,
                    job,
                    relay,
                    wake,
                    latch.has_leadership,
                    _grace(client, grace),
                    exit_process_on_lost,
                )
                if status != ExitCode.LOST or not rejoin or relay.first is not None:
                    return status
                _say(out, f"standing by to lead {name} again (--rejoin)")
        finally:
            latch.close()


def _run_command(
    out: TextIO,
    what: str,
    job: list[str] | Call,
    relay: SignalRelay,
    wake: threading.Event,
    still_ours: Callable[[], bool],
    grace: float,
    exit_process_on_lost: bool,
) -> int:
    if callable(job):
        run = InProcess(job, _short(job))
        # Said from a thread of its own: a stderr that blocks must not hold up the loss.
        return run.run(
            relay, wake, still_ours, grace, lambda m: _say_soon(out, m), exit_process_on_lost
        )
    return _run_child(out, what, job, relay, wake, still_ours, grace)


def _run_child(
    out: TextIO,
    what: str,
    argv: list[str],
    relay: SignalRelay,
    wake: threading.Event,
    still_ours: Callable[[], bool],
    grace: float,
) -> int:
    """Start the child and watch it and the hold; its status, or LOST after stopping it."""
    child = Child(argv)
    failed = child.start(wake)
    if failed is not None:
        code, reason = failed
        _say(out, reason)
        return code
    relay.forward_to(child.process)
    try:
        if relay.first is not None and child.exit_status() is None:
            # A signal came between the acquire and the start: pass it on now.
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, relay.first)
        while True:
            wake.clear()
            status = child.exit_status()
            if status is not None:
                return status
            if not still_ours():
                break
            wake.wait(0.5)
        # Act first, talk later: the SIGTERM goes before a word is written, and the
        # word is written from a thread of its own, since a stderr that blocks (a
        # full pipe to a stalled log shipper) must hold up neither the SIGTERM nor
        # the SIGKILL after the grace.
        child.terminate()
        _say_soon(
            out,
            f"{what} was lost while {argv[0]} (pid {child.pid}) ran: stopping it "
            f"(SIGTERM, SIGKILL after {grace:g}s)",
        )
        child.stop(grace)
        return ExitCode.LOST
    finally:
        relay.forward_to(None)


def _wait_for(
    attempt: Callable[[], bool],
    relay: SignalRelay,
    wake: threading.Event,
    reporter: contextlib.AbstractContextManager[object],
    cancel: Callable[[], None],
) -> bool | BaseException:
    """Run the blocking ``attempt`` on a thread; the main thread stays free for signals."""
    result: list[bool | BaseException] = []

    def run() -> None:
        try:
            result.append(attempt())
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)
        finally:
            wake.set()

    # The owner data names this thread: that is how the feedback finds our node in line.
    thread = threading.Thread(target=run, name=_WAIT_THREAD, daemon=True)
    with reporter:
        thread.start()
        while thread.is_alive():
            if relay.first is not None:
                # Again on every turn: a cancel() ends only an acquire already
                # waiting, and the thread may not have reached its wait yet.
                cancel()
            wake.wait(0.05 if relay.first is not None else 0.2)
            wake.clear()
    thread.join()
    return result[0]


def _reporter(
    out: TextIO, what: str, look: Callable[[], QueueView], wait: bool, live: bool | None
) -> contextlib.AbstractContextManager[object]:
    if not wait:
        return contextlib.nullcontext()
    if live is None:
        live = _is_terminal(out)
    return WaitReporter(out, what, look, live=live)


def _lock_view(lock: Lock) -> QueueView:
    contenders = lock.contenders()
    holder = next((c.owner for c in contenders if c.is_holder), None)
    pid = os.getpid()
    position = next(
        (
            i
            for i, c in enumerate(contenders)
            if c.owner.pid == pid and c.owner.host == _HOST and c.owner.thread == _WAIT_THREAD
        ),
        None,
    )
    return QueueView(holder, position, len(contenders))


def _latch_view(latch: LeaderLatch) -> QueueView:
    participants = latch.participants()
    ours = latch.node
    holder = None
    if participants:
        raw = participants[0].id
        holder = Owner.from_bytes(raw.encode())
        if holder == Owner() and raw:
            holder = Owner(id=raw)  # a Curator peer's id (often its IP address)
    position = next((i for i, p in enumerate(participants) if p.node == ours), None)
    return QueueView(holder, position, len(participants))


def _holder_text(look: Callable[[], QueueView]) -> str:
    try:
        return describe_owner(look().holder)
    except ZkRecipesError:
        return "another process"


def _lock_is_ours(lock: Lock) -> Callable[[], bool]:
    def still_ours() -> bool:
        try:
            lock.check()
        except LockLost:
            return False
        return True

    return still_ours


class _WakeListener:
    """A LeaderLatch listener that only wakes the run's loop."""

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake

    def is_leader(self) -> None:
        self._wake.set()

    def not_leader(self) -> None:
        self._wake.set()


@contextlib.contextmanager
def _wake_on_state_change(client: ZkClient, wake: threading.Event) -> Iterator[None]:
    """Wake the run's loop on every connection state change (LOST above all)."""

    def listener(change: StateChange) -> None:
        wake.set()

    client.add_listener(listener)
    try:
        yield
    finally:
        client.remove_listener(listener)


def _release(lock: Lock) -> None:
    try:
        lock.release()
    except (LockLost, ClientStateError):
        pass  # the session is gone, and our node with it
    except ZkRecipesError as exc:
        log.warning("releasing %s failed (%s); it goes with the session", lock.path, exc)


def _check_command(command: Sequence[str] | Call) -> list[str] | Call:
    if callable(command):
        return command
    if isinstance(command, str):
        raise ConfigurationError(
            f"command must be a list of arguments like ['./manage.py', 'migrate'], got {command!r}"
        )
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ConfigurationError(
            "no command to run: give one after '--', e.g. zk-recipes lock NAME -- ./job.sh"
        )
    return argv


def _label(job: list[str] | Call) -> str:
    """The command as owner data and logs name it: its command line, or the call's name."""
    return describe(job) if callable(job) else shlex.join(job)


def _short(job: list[str] | Call) -> str:
    return describe(job) if callable(job) else job[0]


def _check_timeout(timeout: float | None, wait: bool) -> None:
    if timeout is None:
        return
    if not wait:
        raise ConfigurationError("give either --no-wait or --timeout, not both")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ConfigurationError(f"timeout must be a number of seconds >= 0, got {timeout!r}")


def _grace(client: ZkClient, grace: float | None) -> float:
    if grace is None:
        return default_grace(client)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise ConfigurationError(f"grace must be a number of seconds >= 0, got {grace!r}")
    return float(grace)


def _failed(out: TextIO, what: str, exc: BaseException) -> int:
    if isinstance(exc, ConfigurationError):
        _say(out, f"{what}: {exc}")
        return ExitCode.CONFIG
    if isinstance(exc, (ConnectionLostError, ZkTimeoutError, ClientStateError)):
        _say(out, f"{what}: ZooKeeper is unreachable: {exc}")
        return ExitCode.UNAVAILABLE
    raise exc


def _interrupted(out: TextIO, what: str, signum: int) -> int:
    _say(out, f"{signal.Signals(signum).name} while waiting for {what}: the command did not run")
    return 128 + signum


def _say_soon(out: TextIO, message: str) -> threading.Thread | None:
    """``_say`` on a daemon thread of its own: the caller never waits for the stream.

    The thread, for a caller that may wait a bounded time before it exits; None
    when no thread could start (the message is then not written).
    """
    thread = threading.Thread(target=_say, args=(out, message), name="zk-recipes say", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


def _say(out: TextIO, message: str) -> None:
    try:
        out.write(f"zk-recipes: {message}\n")
        out.flush()
    except (OSError, ValueError):
        pass


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


__all__ = [
    "default_grace",
    "run_as_leader",
    "run_locked",
]
