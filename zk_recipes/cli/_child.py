"""The guarded command as a child process: start it, pass signals on, stop all of it when we must.

The command runs in a process group of its own, watched by a keeper that
takes the group down if we die (``_group``: the shim, the keeper and why).
Here is the supervisor's side:

- **Starting.** ``spawn()`` starts the shim: from then on the command's pid and
  group are known (a leader's election node names them), but nothing runs.
  ``go()`` starts the keeper, then gives the word; the shim execs the
  command, or reports why it could not (127 not found, 126 cannot run, as a
  shell says). ``close()`` without ``go()`` ends the shim: the command never ran.
- **Signals.** SIGINT, SIGTERM and SIGHUP sent to us are passed on to the
  command's group, so ``kill <our pid>`` (systemd, Kubernetes, a deploy
  script) reaches every process of the command, once: the group is not ours,
  so nothing sent to our group reaches it twice.
- **The terminal.** When we are the foreground job of a terminal (run from an
  interactive shell), the command's group is made the foreground while it
  runs, as a shell does for a job: it can read the terminal, and a Ctrl-C
  typed there reaches the command straight from the terminal, once (we, in
  the background then, do not see it). We take the terminal back when it is
  done. A Ctrl-Z is undone at once (SIGCONT, and a word on stderr): a
  stopped command would go on holding the lock, and the shell that waits for
  us would never get the terminal back.
- **Stopping.** On a loss the group gets SIGTERM, then SIGKILL after the
  grace period if anything in it still lives (``stop``). When the command
  ends by itself, what it left running in its group is stopped the same way
  (``close``), before the lock is released: nothing runs unguarded after.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import Any

from zk_recipes.cli import _group
from zk_recipes.cli._exit_codes import ExitCode, from_returncode

#: The signals a run catches and passes on to the child.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: How long ``go()`` waits for the shim to say whether the exec worked.
_EXEC_REPORT_SECONDS = 10.0
#: How long ``close()`` waits for the keeper and the shim to end.
_END_SECONDS = 5.0


def foreground_terminal() -> int | None:
    """The descriptor (0, 1 or 2) of the terminal whose foreground job we are, or None."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return fd if os.tcgetpgrp(fd) == os.getpgrp() else None
        except OSError:
            continue
    return None


class SignalRelay:
    """Catches the forwarded signals for the length of a run (main thread only).

    Each one is remembered (``received``), wakes the run's loop, and is sent
    on to the child's group once there is one. Outside the main thread Python
    cannot catch signals; the relay then does nothing and the defaults apply
    (nor is the terminal handed over: ``terminal`` stays None).
    """

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._child: Child | None = None
        self._previous: dict[int, Any] = {}
        #: The terminal to hand to the command (``foreground_terminal()``), main thread only.
        self.terminal: int | None = None
        self.received: list[int] = []

    def __enter__(self) -> SignalRelay:
        if threading.current_thread() is threading.main_thread():
            self.terminal = foreground_terminal()
            for signum in FORWARDED:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def forward_to(self, child: Child | None) -> None:
        self._child = child

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        child = self._child
        if child is not None:
            child.signal(signum)
        self._wake.set()

    @property
    def first(self) -> int | None:
        return self.received[0] if self.received else None


class Child:
    """One run of the command in a process group of its own (see the module docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        terminal: int | None = None,
        on_suspend: Callable[[], object] | None = None,
    ) -> None:
        self.argv = list(argv)
        self._terminal = terminal
        self._on_suspend = on_suspend
        self._shim: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._keeper: subprocess.Popen[bytes] | None = None
        self._keeper_pipe: int | None = None
        self._reaper: threading.Thread | None = None
        self._ran = False
        self._closed = False
        #: The command's ``Popen``-style returncode (-N: killed by signal N), None while it runs.
        self.returncode: int | None = None

    # -- starting ------------------------------------------------------------------------
    def spawn(self, wake: threading.Event) -> tuple[int, str] | None:
        """Start the shim (the command's pid and group exist from now on); why not, if not."""
        if not os.path.isfile(_group.__file__):  # installed where no file can be run
            return ExitCode.CANNOT_RUN, f"cannot start {self.argv[0]}: {_group.__file__} is missing"
        ours, theirs = socket.socketpair()
        tty = -1 if self._terminal is None else self._terminal
        group: dict[str, Any] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {}  # else the shim does it
        )
        try:
            self._shim = subprocess.Popen(
                _script("shim", str(theirs.fileno()), str(tty), "--", *self.argv),
                pass_fds=(theirs.fileno(),),
                **group,
            )
        except OSError as exc:
            ours.close()
            return ExitCode.CANNOT_RUN, f"cannot start {self.argv[0]}: {_python_failed(exc)}"
        finally:
            theirs.close()
        self._sock = ours
        self._reaper = threading.Thread(
            target=self._reap, args=(wake,), name="zk-recipes child waiter", daemon=True
        )
        self._reaper.start()
        return None

    def go(self, grace: float) -> tuple[int, str] | None:
        """Start the keeper, then the command; ``(exit code, reason)`` if it could not run."""
        assert self._sock is not None
        if self.returncode is not None:  # the shim was killed while it waited
            return from_returncode(self.returncode), f"{self.argv[0]} was stopped before it ran"
        read_end, write_end = os.pipe()
        try:
            self._keeper = subprocess.Popen(
                _script("keep", str(read_end), str(self.pgid), f"{grace:.3f}"),
                pass_fds=(read_end,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            os.close(write_end)
            return ExitCode.CANNOT_RUN, f"cannot start {self.argv[0]}: {_python_failed(exc)}"
        finally:
            os.close(read_end)
        self._keeper_pipe = write_end
        self._ran = True
        try:
            self._sock.sendall(_group.GO)
            self._sock.settimeout(_EXEC_REPORT_SECONDS)
            report = self._sock.recv(64)  # b"" once the exec closed the shim's end
        except OSError:
            report = b""  # no word in time, or the shim is gone: its status says why
        return _exec_failure(self.argv[0], report)

    # -- watching ------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """The command's pid (the shim's until it execs: the same process)."""
        assert self._shim is not None
        return self._shim.pid

    @property
    def pgid(self) -> int:
        """The command's process group: its pid, as its group's leader."""
        return self.pid

    def exit_status(self) -> int | None:
        """Its exit status as a shell reports it, or None while it runs."""
        code = self.returncode
        return None if code is None else from_returncode(code)

    def _reap(self, wake: threading.Event) -> None:
        """Wait for the command (not ``Popen.wait``: stops are seen too, to undo a Ctrl-Z)."""
        assert self._shim is not None
        code = 0
        while True:
            try:
                _, status = os.waitpid(self.pid, os.WUNTRACED)
            except ChildProcessError:
                break
            if os.WIFSTOPPED(status):
                if os.WSTOPSIG(status) == signal.SIGTSTP and self._ran:
                    _group.signal_group(self.pgid, signal.SIGCONT)
                    if self._on_suspend is not None:
                        self._on_suspend()
                continue
            code = os.waitstatus_to_exitcode(status)
            break
        self.returncode = self._shim.returncode = code
        wake.set()

    # -- stopping ------------------------------------------------------------------------
    def signal(self, signum: int) -> None:
        """Send ``signum`` to the command's group (nothing once it is empty)."""
        if self._shim is not None:
            _group.signal_group(self.pgid, signum)

    def terminate(self) -> None:
        """SIGTERM to the group now (``stop`` then waits and escalates)."""
        self.signal(signal.SIGTERM)

    def stop(self, grace: float, *, terminated: bool = False) -> None:
        """SIGTERM (unless ``terminated``: sent already), SIGKILL after ``grace`` to what lives."""
        _group.stop_group(self.pgid, grace, terminated=terminated)
        if self._reaper is not None:
            self._reaper.join(_END_SECONDS)

    def close(self, grace: float) -> bool:
        """End the run: the shim if it never ran, what the command left in its group else.

        True if processes were left in the group and had to be stopped. Then
        the keeper is let go, and the terminal taken back.
        """
        if self._shim is None or self._closed:
            return False
        self._closed = True  # once: the group's number is free again after this
        left = self._ran and _group.group_alive(self.pgid)
        if left:
            _group.stop_group(self.pgid, grace)
        if self._sock is not None:
            self._sock.close()  # a shim still waiting ends without running anything
            self._sock = None
        if self._keeper_pipe is not None:
            os.close(self._keeper_pipe)  # the keeper finds the group empty and ends
            self._keeper_pipe = None
        if self._keeper is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._keeper.wait(_END_SECONDS)
        if self._reaper is not None:
            self._reaper.join(_END_SECONDS)
        if self._ran and self._terminal is not None:
            with contextlib.suppress(OSError):
                if os.tcgetpgrp(self._terminal) == self.pgid:
                    _group.take_terminal(self._terminal, os.getpgrp())
        return left


def _script(role: str, *args: str) -> list[str]:
    """``_group`` run as a script by this interpreter: isolated, no site-packages."""
    return [sys.executable, "-I", "-S", os.path.abspath(_group.__file__), role, *args]


def _python_failed(exc: OSError) -> str:
    return f"this Python ({sys.executable or 'unknown'}) could not be run: {exc}"


def _exec_failure(program: str, report: bytes) -> tuple[int, str] | None:
    """The shim's report after the word: nothing (the exec worked), or the errno."""
    text = report.decode("ascii", "replace").strip()
    if not text.isdigit():
        return None
    code = int(text)
    if code in (errno.ENOENT, errno.ENOTDIR):
        return ExitCode.NOT_FOUND, f"command not found: {program}"
    return ExitCode.CANNOT_RUN, f"cannot run {program}: {os.strerror(code)}"
