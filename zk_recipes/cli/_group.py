"""The command's process group: it runs in a group of its own, and it goes when we go.

Why. ``zk-recipes lock``/``leader`` (and ``manage.py zklock --exec``, ``flask zk
lock``, which end in the same run) supervise a command that may run only while
they hold. Two ways it could outlive the hold: a command that forks (a shell
script, ``sh -c 'a | b'``, ``make``) leaves processes that a signal to its pid
alone never reaches; and a supervisor that dies (``kill -9``, the OOM killer)
can stop nothing, while its session expires and the lock goes to the next host.

Design: three processes.

- **The command** starts as a shim of ours, this module run as a script
  (``python -I -S _group.py shim SOCKET TTY -- COMMAND...``), spawned as the
  leader of a new process group. It waits for the word ``go`` on a socket from
  the supervisor, then becomes the command (``execvp``: the same pid). So the
  command's pid and group (one number) are known before it runs: a leader's
  election node carries them from its creation, which matters because that
  node is never written again (a data change on it would end the watch of a
  Curator LeaderLatch queued behind it). An EOF before the word (the
  supervisor died, or gave up) ends the shim without running anything. A
  failed exec is reported on the socket (the errno); a successful one closes it.
- **The keeper**, this module again (``keep PIPE PGID GRACE``), is started in a
  session of its own before the word is given, so the command never runs
  unwatched. It reads a pipe whose only writer is the supervisor; the kernel
  closes a process's descriptors however it dies, so EOF means the supervisor
  is gone (or done): it sends SIGTERM to the group, and SIGKILL after the grace
  to whatever still lives there. In a session of its own it is spared by a
  ``kill`` of the supervisor's process group, by the terminal's signals and by
  the supervisor's own signals to the command's group.
- **The supervisor** signals the group itself while it lives (``stop_group``):
  on a loss, with the signals it passes on, and when the command ends (what it
  left running in its group goes too, before the lock is released).

Why not ``PR_SET_PDEATHSIG``: it reaches the direct child only, is Linux's
alone, and fires when the *thread* that forked the child ends, not the
process. Why not ``preexec_fn``: kazoo's threads run in the supervisor, where
Python code between fork and exec can deadlock; the supervisor only uses
``process_group`` / ``start_new_session``, and shim and keeper are
single-threaded.

Alive. A group is empty once ``killpg(pgid, 0)`` finds nobody; zombies count
there, and an orphan whose new parent never reaps it (a container whose PID 1
is not an init) would keep a dead group "alive" for good, so on Linux the
members are read from /proc and zombies left out. Elsewhere a zombie counts
until its parent reaps it.

Limits. A process that leaves the group (a daemon that calls ``setsid``) is
not stopped. POSIX only (Linux, macOS, the BSDs), as the rest of the command
line. This module imports the standard library alone: shim and keeper run it
as a script with ``-I -S`` (no site-packages: quick to start).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
from collections.abc import Sequence

#: What the supervisor writes to let the shim become the command.
GO = b"go\n"
#: How often a stop looks whether the group is empty yet.
POLL_SECONDS = 0.02
#: How long a stop waits for the group to go after SIGKILL before it gives up.
KILLED_WAIT_SECONDS = 5.0


# -- the group, from outside --------------------------------------------------------------


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False when nobody is left in it."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody is there that we may not signal (a setuid program)
    return True


def group_alive(pgid: int) -> bool:
    """True while a live process (not a zombie) is in the group ``pgid``."""
    if not signal_group(pgid, 0):
        return False
    members = _live_members(pgid)
    return True if members is None else members > 0


def _live_members(pgid: int) -> int | None:
    """How many live members /proc shows (Linux); None where there is no /proc to read."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    if "self" not in names:
        return None  # not a Linux /proc
    live = 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold anything, so split after its ")".
        fields = text[text.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            live += 1
    return live


def wait_empty(pgid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for the group to empty; True once it is."""
    deadline = time.monotonic() + seconds
    while group_alive(pgid):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(POLL_SECONDS, left))
    return True


def stop_group(pgid: int, grace: float, *, terminated: bool = False) -> bool:
    """SIGTERM to the group (unless ``terminated``: sent already), SIGKILL after ``grace``.

    Returns once the group is empty (True), or False if something still lived
    ``KILLED_WAIT_SECONDS`` after the SIGKILL (a process stuck in the kernel).
    """
    if not terminated and not signal_group(pgid, signal.SIGTERM):
        return True
    if wait_empty(pgid, grace):
        return True
    signal_group(pgid, signal.SIGKILL)
    return wait_empty(pgid, KILLED_WAIT_SECONDS)


def take_terminal(fd: int, pgid: int) -> None:
    """Make ``pgid`` the foreground group of the terminal ``fd``, as a shell does for a job.

    SIGTTOU is blocked meanwhile: a process of a background group that sets
    the foreground would otherwise be stopped by it.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# -- the two programs ---------------------------------------------------------------------


def shim(sock: int, tty: int, argv: Sequence[str]) -> None:
    """Wait for the word, then become the command; exit without running it on EOF."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # a group of its own (already, where the spawn could ask for it)
    word = b""
    while not word.endswith(b"\n"):
        chunk = os.read(sock, 16)
        if not chunk:
            break
        word += chunk
    if word != GO:
        os._exit(0)
    if tty >= 0:
        take_terminal(tty, os.getpgrp())
    # Python ignores these at start-up, and an ignored signal stays ignored across exec.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.set_inheritable(sock, False)  # closed by a successful exec: that is the supervisor's "ok"
    try:
        os.execvp(argv[0], list(argv))
    except OSError as exc:
        code = exc.errno or errno.EIO
        with contextlib.suppress(OSError):
            os.write(sock, f"{code}\n".encode())
        os._exit(127 if code in (errno.ENOENT, errno.ENOTDIR) else 126)


def keep(pipe: int, pgid: int, grace: float) -> None:
    """Read ``pipe`` until EOF (the supervisor is gone or done), then stop the group."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # only the supervisor's end tells us to act
    while True:
        try:
            if not os.read(pipe, 64):
                break
        except OSError:
            break
    stop_group(pgid, grace)


def main(args: Sequence[str]) -> None:
    """``shim SOCKET TTY -- COMMAND...`` or ``keep PIPE PGID GRACE``."""
    if args[:1] == ["shim"] and args[3:4] == ["--"] and len(args) > 4:
        shim(int(args[1]), int(args[2]), args[4:])
    elif args[:1] == ["keep"] and len(args) == 4:
        keep(int(args[1]), int(args[2]), float(args[3]))
    else:
        sys.exit(f"usage: {sys.argv[0]} shim SOCKET TTY -- COMMAND... | keep PIPE PGID GRACE")


if __name__ == "__main__":
    main(sys.argv[1:])
