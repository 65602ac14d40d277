"""The command while it holds: run it, watch it and the hold at once, stop it when the hold ends.

What ``run_locked`` and ``run_as_leader`` do once the lock or leadership is
theirs. Two things are watched together: the command ending (its status
becomes the run's) and the hold ending, judged by ``still_ours`` (which
answers from the client's loss epoch) and woken by a state listener the
moment LOST is published.

Act first, talk later: on a loss the command's group gets SIGTERM before a
word is written, and the word is written from a thread of its own, since a
stderr that blocks (a full pipe to a stalled log shipper) must hold up
neither the SIGTERM nor the SIGKILL after the grace.

The messages for people live here too (``say``, ``say_soon``,
``command_text``): every line a run writes starts with ``zk-recipes:`` and
names the command by its whole command line.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence
from typing import TextIO

from zk_recipes.cli._child import Child, SignalRelay
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._in_process import Call, InProcess, describe

#: Longer command lines are cut in messages (the owner data keeps them whole).
_LONGEST_COMMAND = 200


def run_command(
    out: TextIO,
    what: str,
    job: Child | Call,
    relay: SignalRelay,
    wake: threading.Event,
    still_ours: Callable[[], bool],
    grace: float,
    *,
    exit_process_on_lost: bool = False,
    started: Callable[[Child], object] | None = None,
) -> int:
    """Run the job (a spawned ``Child``, or a call in this process) while ``still_ours()``."""
    if isinstance(job, Child):
        return _run_child(out, what, job, relay, wake, still_ours, grace, started)
    run = InProcess(job, describe(job))
    # Said from a thread of its own: a stderr that blocks must not hold up the loss.
    return run.run(relay, wake, still_ours, grace, lambda m: say_soon(out, m), exit_process_on_lost)


def _run_child(
    out: TextIO,
    what: str,
    child: Child,
    relay: SignalRelay,
    wake: threading.Event,
    still_ours: Callable[[], bool],
    grace: float,
    started: Callable[[Child], object] | None,
) -> int:
    """Start the command and watch it and the hold; its status, or LOST after stopping it."""
    command = command_text(child.argv)
    try:
        failed = child.go(grace)
        if failed is not None:
            code, reason = failed
            say(out, reason)
            return code
        relay.forward_to(child)
        if started is not None:
            started(child)
        if relay.first is not None:
            # A signal came between the acquire and the start: pass it on now.
            child.signal(relay.first)
        while True:
            wake.clear()
            status = child.exit_status()
            if status is not None:
                return status
            if not still_ours():
                break
            wake.wait(0.5)
        child.terminate()  # act first
        say_soon(
            out,
            f"{what} was lost while {command} (pid {child.pid}) ran: stopping its process "
            f"group {child.pgid} (SIGTERM, SIGKILL after {grace:g}s)",
        )
        child.stop(grace, terminated=True)
        return ExitCode.LOST
    finally:
        relay.forward_to(None)
        if child.close(grace):
            say_soon(
                out,
                f"{command} left processes running in its group {child.pgid}: stopped them "
                f"(SIGTERM, SIGKILL after {grace:g}s) before letting {what} go",
            )


def suspend_note(out: TextIO, what: str, argv: Sequence[str]) -> Callable[[], object]:
    """What a Ctrl-Z of the command gets: a word (the command was continued at once)."""
    return lambda: say_soon(
        out,
        f"{command_text(argv)} holds {what}: it cannot be suspended (Ctrl-Z), so it was "
        "continued; Ctrl-C stops it",
    )


def command_text(job: Sequence[str] | Call, *, whole: bool = False) -> str:
    """The command for people: its whole command line, or the call's name.

    In messages a very long line is cut (``whole`` False); the owner data,
    which names the holder, keeps it whole.
    """
    if callable(job):
        return describe(job)
    text = shlex.join(job)
    if whole or len(text) <= _LONGEST_COMMAND:
        return text
    return text[: _LONGEST_COMMAND - 1] + "…"


def say_soon(out: TextIO, message: str) -> threading.Thread | None:
    """``say`` on a daemon thread of its own: the caller never waits for the stream.

    The thread, for a caller that may wait a bounded time before it exits; None
    when no thread could start (the message is then not written).
    """
    thread = threading.Thread(target=say, args=(out, message), name="zk-recipes say", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


def say(out: TextIO, message: str) -> None:
    try:
        out.write(f"zk-recipes: {message}\n")
        out.flush()
    except (OSError, ValueError):
        pass
