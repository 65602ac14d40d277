"""The exit codes of ``zk-recipes lock`` / ``leader`` (and Django's and Flask's faces over them).

One table, the same everywhere. When the command ran, its own exit status is
passed on (128 + N when a signal N killed it, as a shell reports it). Our own
outcomes use codes that a shell does not give a meaning of its own (126, 127
and 128 + N are the shell's) and that a cron wrapper can tell apart:

====  =============  ===========================================================
code  name           meaning
====  =============  ===========================================================
2     USAGE          bad command line: click's usage errors, and a bad NAME,
                     PATH, ``--timeout`` or ``--grace`` (one line, what to give)
69    UNAVAILABLE    ZooKeeper could not be reached in time (sysexits EX_UNAVAILABLE)
70    NOT_INSTALLED  a part of zk-recipes the command needs is not installed; the
                     message names the extra, as pip install 'zk-recipes[testing]'
                     for ``zk-recipes server`` (sysexits EX_SOFTWARE)
75    BUSY           ``--no-wait`` and somebody else holds it (EX_TEMPFAIL: try later)
78    CONFIG         bad settings (EX_CONFIG)
79    LOST           the lock or leadership was lost while the command ran: it was
                     terminated (SIGTERM, then SIGKILL after the grace period)
124   TIMED_OUT      ``--timeout`` passed before it was ours (as GNU ``timeout``)
126   CANNOT_RUN     the command exists but could not be executed (as a shell)
127   NOT_FOUND      the command was not found (as a shell)
====  =============  ===========================================================

Why 70 for a missing extra: it is neither a bad setting (78: nothing in the
settings would fix it) nor an unreachable service (69: retrying later will
not help either), and 126/127 belong to the command run under the lock. The
fault is in the installed software, which sysexits calls EX_SOFTWARE, and
installing the extra named in the message is the fix.

A signal that stops the wait itself (Ctrl-C while queued) ends the run with
128 + N, like any program killed by it; the command never ran.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What ``run_locked`` / ``run_as_leader`` return when it is not the command's own status."""

    USAGE = 2
    UNAVAILABLE = 69
    NOT_INSTALLED = 70
    BUSY = 75
    CONFIG = 78
    LOST = 79
    TIMED_OUT = 124
    CANNOT_RUN = 126
    NOT_FOUND = 127


def from_returncode(returncode: int) -> int:
    """A child's ``Popen.returncode`` as a shell reports it (a signal N gives 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode
