"""The guarded command as a child process: start it, pass signals on, stop it when we must.

Signals. SIGINT, SIGTERM and SIGHUP sent to us are passed on to the child,
so ``kill <our pid>`` (systemd, Kubernetes, a deploy script) reaches the
command, which then exits and lets the lock go. One exception: a Ctrl-C typed
at the terminal whose foreground process group we are in already reached the
child (it is in our process group), so that SIGINT is not sent a second time.
The child stays in our process group, so anything that signals the whole
group (a terminal, ``kill -- -PGID``, a supervisor) reaches it too, and a
``kill -9`` of the group leaves no command running unguarded.

Stopping. When the lock or leadership is lost, the child gets SIGTERM, then
SIGKILL after the grace period. Only the child itself is signalled: a shell
script should ``exec`` its long-running program, or trap TERM and pass it on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any

from zk_recipes.cli._exit_codes import ExitCode, from_returncode

#: The signals a run catches and passes on to the child.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _terminal_sends_to_our_group() -> bool:
    """True if a terminal's Ctrl-C reaches our process group (and so the child) by itself."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


class SignalRelay:
    """Catches the forwarded signals for the length of a run (main thread only).

    Each one is remembered (``received``), wakes the run's loop, and is sent
    on to the child once there is one. Outside the main thread Python cannot
    catch signals; the relay then does nothing and the defaults apply.
    """

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._child: subprocess.Popen[bytes] | None = None
        self._previous: dict[int, Any] = {}
        self._terminal_group = False
        self.received: list[int] = []

    def __enter__(self) -> SignalRelay:
        if threading.current_thread() is threading.main_thread():
            self._terminal_group = _terminal_sends_to_our_group()
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

    def forward_to(self, child: subprocess.Popen[bytes] | None) -> None:
        self._child = child

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        child = self._child
        from_terminal = signum == signal.SIGINT and self._terminal_group
        if child is not None and child.returncode is None and not from_terminal:
            with contextlib.suppress(ProcessLookupError):  # it has just exited
                os.kill(child.pid, signum)
        self._wake.set()

    @property
    def first(self) -> int | None:
        return self.received[0] if self.received else None


class Child:
    """One run of the command; ``start()`` says what a shell would if it cannot run."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wake: threading.Event) -> tuple[int, str] | None:
        """Start it; ``(exit code, reason)`` if it could not be started."""
        try:
            self.process = subprocess.Popen(self.argv)
        except FileNotFoundError:
            return ExitCode.NOT_FOUND, f"command not found: {self.argv[0]}"
        except PermissionError as exc:
            return ExitCode.CANNOT_RUN, f"cannot run {self.argv[0]}: {exc.strerror}"
        except OSError as exc:
            return ExitCode.CANNOT_RUN, f"cannot run {self.argv[0]}: {exc}"
        process = self.process

        def wait_and_wake() -> None:
            process.wait()
            wake.set()

        threading.Thread(target=wait_and_wake, name="zk-recipes child waiter", daemon=True).start()
        return None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def exit_status(self) -> int | None:
        """Its exit status as a shell reports it, or None while it runs."""
        assert self.process is not None
        code = self.process.poll()
        return None if code is None else from_returncode(code)

    def terminate(self) -> None:
        """SIGTERM now, if it still runs (``stop`` then waits and escalates)."""
        process = self.process
        assert process is not None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)

    def stop(self, grace: float) -> int:
        """SIGTERM, then SIGKILL if it is still running after ``grace`` seconds; its status."""
        process = self.process
        assert process is not None
        self.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return from_returncode(process.returncode)
