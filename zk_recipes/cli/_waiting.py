"""Feedback while a run waits: who is in the way, since when, and where we are in line.

On a terminal one status line is redrawn every second (the age ticks). To a
file or a pipe (cron, CI logs) a line is written when the wait starts and
again only when the holder changes, so a long wait does not fill the log.
Written to stderr: the command's own stdout stays clean.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TextIO

from zk_recipes import LeaderLatch, Lock, Owner, ZkRecipesError

log = logging.getLogger("zk_recipes.cli")

_HOST = socket.gethostname()
#: The thread that queues a lock: its name in our node's owner data finds our place in line.
WAIT_THREAD = "zk-recipes guarded run"


@dataclasses.dataclass(frozen=True)
class QueueView:
    """One look at the queue we wait in."""

    #: The holder's (or leader's) owner data; empty for a client that writes none.
    holder: Owner | None
    #: Our 0-based place in line, None until our node is there.
    position: int | None
    #: How many are in line, holder included.
    length: int
    #: An election: the holder leads, and its node's ``since`` says when it joined.
    leading: bool = False


def describe_owner(owner: Owner | None, now: float | None = None, *, leading: bool = False) -> str:
    """``host:pid (id), for 12s``: the holder as ``Owner`` prints it, and for how long.

    How long counts from the moment the hold began where the node records it
    (``held_since``), else from when the node was queued: for a leader that is
    when it joined the election, so its term is "at most" that old.
    """
    if owner is None:
        return "nobody"
    at = now or time.time()
    if owner.held_since is not None:
        return f"{owner}, for {format_age(at - owner.held_since)}"
    if owner.since is None:
        return str(owner)
    bound = "at most " if leading else ""
    return f"{owner}, for {bound}{format_age(at - owner.since)}"


def lock_view(lock: Lock) -> QueueView:
    """A look at a lock's queue: its holder, and our place (found by our wait thread's name)."""
    contenders = lock.contenders()
    holder = next((c.owner for c in contenders if c.is_holder), None)
    pid = os.getpid()
    position = next(
        (
            i
            for i, c in enumerate(contenders)
            if c.owner.pid == pid and c.owner.host == _HOST and c.owner.thread == WAIT_THREAD
        ),
        None,
    )
    return QueueView(holder, position, len(contenders))


def latch_view(latch: LeaderLatch) -> QueueView:
    """A look at an election: the leader's owner data (or a Curator peer's id), our place."""
    participants = latch.participants()
    ours = latch.node
    holder = None
    if participants:
        raw = participants[0].id
        holder = Owner.from_bytes(raw.encode())
        if holder == Owner() and raw:
            holder = Owner(id=raw)  # a Curator peer's id (often its IP address)
    position = next((i for i, p in enumerate(participants) if p.node == ours), None)
    return QueueView(holder, position, len(participants), leading=True)


def format_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class WaitReporter:
    """A thread that looks at the queue every ``interval`` seconds while we wait."""

    def __init__(
        self,
        out: TextIO,
        what: str,
        look: Callable[[], QueueView],
        *,
        live: bool,
        interval: float = 1.0,
    ) -> None:
        self._out = out
        self._what = what
        self._look = look
        self._live = live
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_holder: tuple[object, ...] | None = None
        self._looks = 0
        self._drawn = False

    def __enter__(self) -> WaitReporter:
        self._thread = threading.Thread(target=self._run, name="zk-recipes wait feedback")
        self._thread.daemon = True
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self._drawn:
            self._write("\r\x1b[K")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                view = self._look()
            except ZkRecipesError as exc:  # the wait itself rides such trouble out
                log.debug("reading the queue of %s failed: %s", self._what, exc)
            else:
                self._show(view)
            self._stop.wait(self._interval)

    def _show(self, view: QueueView) -> None:
        if self._stop.is_set():
            return
        line = (
            f"waiting for {self._what}: held by {describe_owner(view.holder, leading=view.leading)}"
        )
        if view.position is not None:
            line += f"; we are {_ordinal(view.position + 1)} of {view.length} in line"
        if self._live:
            self._write(f"\r\x1b[K{line}")
            self._drawn = True
            return
        self._looks += 1
        if view.position is None and self._looks < 3:
            return  # our node is not in line yet: wait a little for the whole picture
        holder = view.holder
        key = (holder.host, holder.pid, holder.since) if holder is not None else None
        if key != self._last_holder:
            self._last_holder = key
            self._write(f"zk-recipes: {line}\n")

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):  # a closed pipe must not break the run
            pass
