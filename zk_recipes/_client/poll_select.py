"""``select`` for kazoo's connection thread: one poll(2) call instead of an epoll object per call.

Why: kazoo's threading handler selects through ``selector_select``, which
makes a new ``DefaultSelector`` (epoll_create1, epoll_ctl, epoll_wait,
close) on every call, about five times per request: in its loop and before
each recv and send. That was 40 % of the connection thread's CPU per lock
cycle (../shared/notes/perf-profile.md, cut 1). ``poll`` waits on the same
few descriptors with one system call and no kernel object to create.

The contract is kazoo's, kept exactly (``KazooConnection`` installs it on its
own client's handler, so nothing else in the process changes):

- ``(rlist, wlist, xlist, timeout=None) -> (readable, writable, [])``, with
  file objects or descriptors in, the same objects out, no FD_SETSIZE limit;
- a negative timeout is a ValueError and a non-number a TypeError;
- a descriptor that is readable is reported readable only, even if it is
  also writable (kazoo's ``elif``);
- POLLHUP, POLLERR and POLLNVAL count as ready (as epoll's selectors report
  them), so the recv or send that follows raises into kazoo's socket error
  handling, as before.

Session-loss detection does not depend on it: the simulated-expiry
watchdog reads the time of the last reply, stamped by the read hook.
A candidate for kazoo upstream: it helps every kazoo user on Linux and macOS.
"""

from __future__ import annotations

import math
import select
from collections.abc import Sequence
from typing import Any

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL


def _milliseconds(timeout: float | None) -> int | None:
    # poll takes whole milliseconds: round up, as selectors does, never to a busy 0.
    return None if timeout is None else math.ceil(timeout * 1000)


def wait_ready(fd: Any, events: int, timeout: float | None) -> bool:
    """Whether ``fd`` became ready for ``events`` (POLLIN or POLLOUT) within ``timeout`` s.

    One descriptor, one direction: the wait of socket_io's reads and writes.
    """
    poller = select.poll()
    poller.register(fd, events)
    wanted = _READABLE if events & select.POLLIN else _WRITABLE
    return any(revents & wanted for _, revents in poller.poll(_milliseconds(timeout)))


def _fd(fileobj: Any) -> int:
    if isinstance(fileobj, int):
        fd = fileobj
    else:
        try:
            fd = int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"Invalid file object: {fileobj!r}") from exc
    if fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd}")
    return fd


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """kazoo's ``handler.select`` on poll(2); see the module docstring for the contract."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    objects: dict[int, list[Any]] = {}
    for fileobj in rlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLIN
        objects.setdefault(fd, []).append(fileobj)
    for fileobj in wlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLOUT
        objects.setdefault(fd, []).append(fileobj)
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = poller.poll(_milliseconds(timeout))
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in ready:
        wanted = masks[fd]
        if wanted & select.POLLIN and events & _READABLE:
            readable.extend(objects[fd])
        elif wanted & select.POLLOUT and events & _WRITABLE:
            writable.extend(objects[fd])
    return readable, writable, []
