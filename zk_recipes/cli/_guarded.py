"""Run a command while holding a lock, or while leader: one implementation for every face.

``zk-recipes lock``/``leader``, Django's ``zklock``/``zkleader`` and Flask's
``flask zk lock``/``leader`` all end here. The sequence of a run:

1. Queue for the lock (a ``Lock`` under ``<prefix>/locks/<name>``) or join the
   election (a ``LeaderLatch`` under ``<prefix>/leaders/<name>``, with the
   SESSION error policy: leadership ends when the session is LOST, which the
   client declares before the server can elect anyone else). The wait runs
   on a thread of its own so the main thread stays free for signals; a
   signal cancels it and the command never runs (exit 128 + N). The wait
   follows the outage rule (``_outage``): ZooKeeper out of reach for the
   connection timeout ends it with UNAVAILABLE, and a refusal is "busy" only
   when a holder is seen.
2. Start the command in a process group of its own, watched by a keeper that
   takes the group down if this process dies (``_child``, ``_group``). A
   leader's shim is started before it joins, so its election node names the
   command's pid and group from its creation (it is never written again); a
   lock's node gets them, and the moment the hold began, with one ``set``
   once the command runs.
3. Watch the command and the hold at once (``_supervise``): on a loss the
   group gets SIGTERM, then SIGKILL after the grace (``default_grace``).
4. Release at once when the command ends (after what it left in its group
   is stopped): the node is deleted, nobody waits for a session to expire.

Size: over the house limit (tests/test_module_sizes.py): ``run_locked`` and
``run_as_leader`` are two doors to one run (wait on a thread under the
outage rule, run the command, release), sharing its relay, wake event and
answers; the child process, the command's group, the outage rule and the
watching of a running command are modules of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
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
from zk_recipes.cli._in_process import Call
from zk_recipes.cli._outage import Outage, refusal
from zk_recipes.cli._supervise import command_text, run_command, say, suspend_note
from zk_recipes.cli._waiting import WAIT_THREAD, QueueView, WaitReporter, latch_view, lock_view
from zk_recipes.frameworks import leader_path, lock_path

log = logging.getLogger("zk_recipes.cli")

#: A ``--no-wait`` refusal with nobody holding (the holder left meanwhile) is tried again
#: this often before the run gives up as UNAVAILABLE.
_FREE_TRIES = 3


class _GaveUp:
    """What ``_wait_for`` returns when the outage rule ended the wait."""


_GAVE_UP = _GaveUp()


def default_grace(client: ZkClient) -> float:
    """Seconds between SIGTERM and SIGKILL after a loss: half the margin before the server acts.

    The client declares LOST ``simulated_expiry_fraction`` (f) of the session
    timeout T after the quorum last heard it; the server may expire the session,
    and give the lock to someone else, from T on. Between the two lies the
    margin ``(1 - f) x T``. SIGKILL goes out after half of it, so the other half
    is left for waking the run, delivering the signals and the processes'
    teardown before anybody else can hold: 1.7 s for the defaults (T = 10 s,
    f = 0.66).
    """
    timeout = client.negotiated_session_timeout or client.settings.session_timeout
    return (1.0 - client.settings.simulated_expiry_fraction) * timeout / 2


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

    ``command`` is a program's argv, run as a child process in a process
    group of its own, or a callable run in this process on the calling thread
    (``_in_process``: its return value is the status; on a loss ``LockLost``
    is raised in it, and with ``exit_process_on_lost`` the process exits if it
    still runs after ``grace``). ``client`` must be started. ``wait=False``
    gives up at once when the lock is held (``ExitCode.BUSY``); ``timeout``
    bounds the wait (``ExitCode.TIMED_OUT``); ZooKeeper out of reach ends it
    with ``ExitCode.UNAVAILABLE`` (``_outage``). Messages for people go to
    ``out`` (stderr); ``live`` (default: ``out`` is a terminal) redraws a
    status line while waiting. See the module docstring and ``ExitCode``.
    """
    job = check_command(command)
    _check_timeout(timeout, wait)
    label = identifier or command_text(job, whole=True)
    path = lock_path(name, prefix)
    lock = Lock(client, path, identifier=label)
    deadline = None if timeout is None else time.monotonic() + timeout
    with _Run.of(client, f"lock {name}", job, grace, out, live, exit_process_on_lost) as run:
        outage = Outage(client, deadline if wait else time.monotonic())
        queued_at = time.time()
        for _ in range(_FREE_TRIES):
            outcome = run.wait_for(
                lambda: lock.acquire(blocking=wait, timeout=_left(deadline)),
                lock.cancel,
                outage,
                run.reporter(lambda: lock_view(lock)) if wait else contextlib.nullcontext(),
            )
            if isinstance(outcome, BaseException):
                return run.failed(outcome)
            if run.relay.first is not None:
                if outcome is True:
                    _release(lock)
                return run.interrupted()
            if outcome is _GAVE_UP:
                return run.unavailable(outage.reason())
            if outcome is True:
                break
            refused = refusal(
                run.out, run.what, run.command_line, lambda: lock_view(lock), outage, timeout
            )
            if refused is not None:
                return refused
        else:
            return run.unavailable("the lock looked free, yet could not be taken")
        try:
            token = lock.fencing_token
            log.info("holding %s (%s, fencing token %d): running %s", run.what, path, token, label)
            child = run.spawned()
            if isinstance(child, int):
                return child
            return run.run_while(
                child,
                _lock_is_ours(lock),
                started=lambda c: _record_owner(client, lock, label, queued_at, c),
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

    When leadership is lost the command is stopped (SIGTERM to its group,
    SIGKILL after ``grace``) and the exit code is ``ExitCode.LOST``, or with
    ``rejoin`` the run stands by again and runs the command anew once it
    leads. The command's own exit ends the run with its status; ZooKeeper out
    of reach for the connection timeout while standing by ends it with
    ``ExitCode.UNAVAILABLE``. ``client`` must be started; the other arguments
    are those of ``run_locked``.
    """
    job = check_command(command)
    label = identifier or command_text(job, whole=True)
    path = leader_path(name, prefix)
    what = f"leadership of {name}"
    with _Run.of(client, what, job, grace, out, live, exit_process_on_lost) as run:
        while True:
            child = run.spawned()
            if isinstance(child, int):
                return child
            try:
                status = _lead(run, path, label, child)
            finally:
                if isinstance(child, Child):
                    child.close(run.grace)
            if status != ExitCode.LOST or not rejoin or run.relay.first is not None:
                return status
            say(run.out, f"standing by to lead {name} again (--rejoin)")


def _lead(run: _Run, path: str, label: str, job: Child | Call) -> int:
    """One term: join (the node names the command's pid and group), stand by, run while leading."""
    owner = Owner.here(label)
    if isinstance(job, Child):
        owner = dataclasses.replace(owner, command_pid=job.pid, command_pgid=job.pgid)
    latch = LeaderLatch(
        run.client, path, owner.to_bytes().decode(), error_policy=ErrorPolicy.SESSION
    )
    latch.add_listener(_WakeListener(run.wake))
    try:
        latch.start()
    except ZkRecipesError as exc:
        return run.failed(exc)
    try:
        outage = Outage(run.client, None)
        with run.reporter(lambda: latch_view(latch)):
            while not (
                latch.has_leadership()
                or run.relay.first is not None
                or outage.over()
                or _ended(job)
            ):
                run.wake.wait(outage.next_look(0.5))
                run.wake.clear()
        if run.relay.first is not None:
            return run.interrupted()
        if isinstance(job, Child) and (status := job.exit_status()) is not None:
            say(run.out, f"{run.command_line} was stopped before it ran (status {status})")
            return status
        if not latch.has_leadership():
            return run.unavailable(outage.reason())
        log.info("%s is ours (%s): running %s", run.what, path, label)
        return run.run_while(job, latch.has_leadership)
    finally:
        latch.close()


@dataclasses.dataclass
class _Run:
    """What the steps of one run share, and the answers they give."""

    client: ZkClient
    what: str
    job: list[str] | Call
    grace: float
    out: TextIO
    live: bool | None
    exit_process_on_lost: bool
    wake: threading.Event
    relay: SignalRelay

    @classmethod
    @contextlib.contextmanager
    def of(
        cls,
        client: ZkClient,
        what: str,
        job: list[str] | Call,
        grace: float | None,
        out: TextIO | None,
        live: bool | None,
        exit_process_on_lost: bool,
    ) -> Iterator[_Run]:
        """A run with its signal relay and wake-up on state changes, for a ``with``."""
        grace = checked_grace(client, grace)
        wake = threading.Event()
        with SignalRelay(wake) as relay, _wake_on_state_change(client, wake):
            stream = sys.stderr if out is None else out
            yield cls(client, what, job, grace, stream, live, exit_process_on_lost, wake, relay)

    @property
    def command_line(self) -> str:
        return command_text(self.job)

    def spawned(self) -> Child | Call | int:
        """The job ready to go: a ``Child`` (its shim waiting for the word), a call, or a code."""
        job = self.job
        if callable(job):
            return job
        note = suspend_note(self.out, self.what, job)
        child = Child(job, terminal=self.relay.terminal, on_suspend=note)
        failed = child.spawn(self.wake)
        if failed is not None:
            code, reason = failed
            say(self.out, reason)
            return code
        return child

    def run_while(
        self,
        job: Child | Call,
        still_ours: Callable[[], bool],
        started: Callable[[Child], object] | None = None,
    ) -> int:
        return run_command(
            self.out,
            self.what,
            job,
            self.relay,
            self.wake,
            still_ours,
            self.grace,
            exit_process_on_lost=self.exit_process_on_lost,
            started=started,
        )

    def reporter(self, look: Callable[[], QueueView]) -> contextlib.AbstractContextManager[object]:
        live = _is_terminal(self.out) if self.live is None else self.live
        return WaitReporter(self.out, self.what, look, live=live)

    def wait_for(
        self,
        attempt: Callable[[], bool],
        cancel: Callable[[], None],
        outage: Outage,
        reporter: contextlib.AbstractContextManager[object],
    ) -> bool | BaseException | _GaveUp:
        """Run the blocking ``attempt`` on a thread; the main thread stays free for signals."""
        result: list[bool | BaseException] = []
        wake, relay = self.wake, self.relay

        def run() -> None:
            try:
                result.append(attempt())
            except BaseException as exc:  # handed to the caller's thread
                result.append(exc)
            finally:
                wake.set()

        # The owner data names this thread: that is how the feedback finds our node in line.
        thread = threading.Thread(target=run, name=WAIT_THREAD, daemon=True)
        gave_up = False
        with reporter:
            thread.start()
            while thread.is_alive():
                gave_up = gave_up or outage.over()
                if relay.first is not None or gave_up:
                    # Again on every turn: a cancel() ends only an acquire already
                    # waiting, and the thread may not have reached its wait yet.
                    cancel()
                wake.wait(0.05 if relay.first is not None or gave_up else outage.next_look(0.2))
                wake.clear()
        thread.join()
        outcome = result[0]
        return _GAVE_UP if gave_up and outcome is not True else outcome

    def failed(self, exc: BaseException) -> int:
        if isinstance(exc, ConfigurationError):
            say(self.out, f"{self.what}: {exc}")
            return ExitCode.CONFIG
        if isinstance(exc, (ConnectionLostError, ZkTimeoutError, ClientStateError)):
            return self.unavailable(f"ZooKeeper is unreachable: {exc}")
        raise exc

    def unavailable(self, why: str) -> int:
        say(self.out, f"{self.what}: {why}; not running {self.command_line}")
        return ExitCode.UNAVAILABLE

    def interrupted(self) -> int:
        signum = self.relay.first
        assert signum is not None
        name = signal.Signals(signum).name
        say(self.out, f"{name} while waiting for {self.what}: the command did not run")
        return 128 + signum


def _record_owner(client: ZkClient, lock: Lock, label: str, queued_at: float, child: Child) -> None:
    """Give our lock node the command's pid and group, and the moment the hold began.

    One ``set``, not waited for: the command runs already. Safe on a lock node:
    whoever waits behind it (ours, Curator's) reads the queue again on any
    change of the node it watches. (Never on an election node: see ``_group``.)
    """
    stats = lock.statistics()
    node = stats.node
    if node is None:
        return
    owner = Owner(
        host=socket.gethostname(),
        pid=os.getpid(),
        thread=WAIT_THREAD,
        since=round(queued_at, 3),
        id=label,
        held_since=round(time.time(), 3),
        command_pid=child.pid,
        command_pgid=child.pgid,
    )
    try:
        client.set_async(node, owner.to_bytes(), session=stats.session_id)  # as its holder
    except ZkRecipesError as exc:  # the hold is judged elsewhere; this is only a label
        log.debug("recording the command in %s failed: %s", node, exc)


def _ended(job: Child | Call) -> bool:
    """True once a standby's shim is gone (someone stopped its group): nothing left to run."""
    return isinstance(job, Child) and job.exit_status() is not None


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


def check_command(command: Sequence[str] | Call) -> list[str] | Call:
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


def _check_timeout(timeout: float | None, wait: bool) -> None:
    if timeout is None:
        return
    if not wait:
        raise ConfigurationError("give either --no-wait or --timeout, not both")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ConfigurationError(f"timeout must be a number of seconds >= 0, got {timeout!r}")


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def checked_grace(client: ZkClient, grace: float | None) -> float:
    if grace is None:
        return default_grace(client)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise ConfigurationError(f"grace must be a number of seconds >= 0, got {grace!r}")
    return float(grace)


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
