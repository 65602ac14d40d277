"""The guarded command as a call in this process: run it, and stop it by raising when we must.

Why: a framework's own command (Django's ``call_command("migrate")``) shares
the process's settings, database connections and exit semantics; running it
as a child would start a second interpreter and lose them. The price: a call
cannot be killed like a child, so stopping it means raising in it.

- **Signals.** While the call runs on the main thread, SIGINT, SIGTERM and
  SIGHUP raise ``Interrupted`` in it (a BaseException, like
  KeyboardInterrupt, so ``except Exception`` does not swallow it); the run
  ends with 128 + N, as a child killed by the signal would.
- **Loss.** When the hold ends, ``LockLost`` is raised in the calling thread:
  on the main thread through a signal sent to that thread, which also breaks
  a blocking system call (``sleep``, a socket read); on another thread at its
  next Python instruction (``PyThreadState_SetAsyncExc``). The run ends with
  ``ExitCode.LOST`` whatever the call does then. If the call is still running
  ``grace`` seconds later and ``exit_process_on_lost`` is set (the call *is*
  the process, as in ``manage.py zklock``), the process exits at once with
  ``ExitCode.LOST``, so nothing runs unguarded once the server could give the
  lock to someone else.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from zk_recipes import LockLost
from zk_recipes.cli._child import FORWARDED, SignalRelay
from zk_recipes.cli._exit_codes import ExitCode

log = logging.getLogger("zk_recipes.cli")

#: A callable run in this process: its return value is the exit status (None means 0).
Call = Callable[[], "int | None"]


class Interrupted(BaseException):
    """Raised in an in-process command by a signal the run caught; ends it with 128 + N."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class InProcess:
    """One run of an in-process command, watched for the end of the hold."""

    def __init__(self, call: Call, label: str) -> None:
        self.call = call
        self.label = label
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.current_thread()
        # Held while raising in the caller and while marking the call done, so
        # nothing is raised in the caller once the call has ended.
        self._guard = threading.Lock()
        self._async_sent = False
        self._handling = False

    def run(
        self,
        relay: SignalRelay,
        wake: threading.Event,
        still_ours: Callable[[], bool],
        grace: float,
        say: Callable[[str], object],
        exit_process_on_lost: bool,
    ) -> int:
        """Run the call on this thread; its status, 128 + N after a signal, or LOST."""
        watcher = threading.Thread(
            target=self._watch,
            args=(wake, still_ours, grace, say, exit_process_on_lost),
            name="zk-recipes hold watcher",
            daemon=True,
        )
        try:
            with self._signals_raise(relay):
                if relay.first is not None:  # a signal came between the acquire and now
                    return 128 + relay.first
                watcher.start()
                try:
                    status = self.call()
                finally:
                    self._end_call()
                    wake.set()
        except Interrupted as exc:
            if self._lost.is_set():
                return ExitCode.LOST
            return 128 + exc.signum
        except LockLost:
            if self._lost.is_set():
                return ExitCode.LOST
            raise
        except BaseException as exc:
            if self._lost.is_set():
                log.warning("%s failed after the hold was lost: %r", self.label, exc)
                return ExitCode.LOST
            raise
        finally:
            if watcher.is_alive():
                watcher.join()
        if self._lost.is_set():
            return ExitCode.LOST
        return 0 if status is None else int(status)

    # -- the watcher ---------------------------------------------------------
    def _watch(
        self,
        wake: threading.Event,
        still_ours: Callable[[], bool],
        grace: float,
        say: Callable[[str], object],
        exit_process_on_lost: bool,
    ) -> None:
        while not self._done.is_set():
            wake.clear()
            if not still_ours():
                break
            wake.wait(0.5)
        if self._done.is_set():
            return
        self._lost.set()
        self._raise_in_caller()  # act first: ``say`` writes from a thread of its own
        say(f"{self.label} lost its hold while running: stopping it (raising LockLost in it)")
        if self._done.wait(grace) or not exit_process_on_lost:
            return
        say(f"{self.label} still ran {grace:g}s after the loss: exiting now (code {ExitCode.LOST})")
        # Flush what is written by now; a stream that blocks must not keep us alive.
        flusher = threading.Thread(target=_flush_std_streams, name="zk-recipes flush", daemon=True)
        with contextlib.suppress(RuntimeError):
            flusher.start()
            flusher.join(_EXIT_FLUSH_SECONDS)
        os._exit(ExitCode.LOST)

    def _raise_in_caller(self) -> None:
        ident = self._thread.ident
        with self._guard:
            if self._done.is_set() or ident is None:
                return
            if self._handling:  # the main thread: a signal also breaks a blocking call
                signal.pthread_kill(ident, signal.SIGTERM)  # our handler raises LockLost
            else:
                self._async_sent = True
                _set_async_exc(ident, LockLost)

    def _end_call(self) -> None:
        with self._guard:
            self._done.set()
            if self._async_sent:  # not yet raised: it must not be raised in our own code
                _set_async_exc(self._thread.ident, None)

    # -- signals -----------------------------------------------------------------

    @contextlib.contextmanager
    def _signals_raise(self, relay: SignalRelay) -> Iterator[None]:
        """While the call runs on the main thread, the forwarded signals raise in it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous: dict[int, Any] = {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self._done.is_set():
                return  # the call has ended; the run is returning
            if self._lost.is_set():
                raise LockLost(f"{self.label}: the hold was lost while it ran")
            relay.received.append(signum)
            raise Interrupted(signum)

        for forwarded in FORWARDED:
            previous[forwarded] = signal.signal(forwarded, on_signal)
        self._handling = True
        try:
            yield
        finally:
            self._handling = False
            for restored, handler in previous.items():
                signal.signal(restored, handler)


#: How long the exit after the grace waits for stdout and stderr to take what is written.
_EXIT_FLUSH_SECONDS = 0.2


def _flush_std_streams() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()


def _set_async_exc(ident: int | None, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in the thread ``ident`` at its next instruction (None: cancel that)."""
    if ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ident), ctypes.py_object(exc) if exc is not None else None
        )


def describe(call: Call) -> str:
    """A name for a call in messages and owner data: its qualified name."""
    name = getattr(call, "__qualname__", None) or getattr(call, "__name__", None)
    return str(name) if name else repr(call)


__all__ = ["Call", "InProcess", "Interrupted", "describe"]
