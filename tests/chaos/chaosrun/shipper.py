"""A worker's log shipper: the pipe its WARNING records go to, drained by the parent.

Each worker writes its warnings to a named pipe, as a service writes stderr to
a log shipper (Docker's blocking log mode, journald, fluentd). The parent
drains it into ``<worker>.shipped.log``; the ``blocked_log_worker`` fault
stops draining and fills the pipe, so the worker's next warning blocks, as
when the shipper stalls. A stalled shipper comes with the same network
trouble as the faults it is paired with: the worker is cut off while its
log stream is blocked, and must still learn of its losses on time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import threading
from pathlib import Path

#: Linux's F_SETPIPE_SZ: a small pipe fills with a few lines.
_F_SETPIPE_SZ = 1031
_PIPE_SIZE = 4096


class LogShipper:
    """The parent's end of one worker's log pipe (a FIFO at ``path``)."""

    def __init__(self, path: Path, copy_to: Path) -> None:
        self.path = path
        os.mkfifo(path)
        # Opened before the worker starts: its open for writing then returns at once.
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, _PIPE_SIZE)
        self._copy = copy_to.open("ab")
        self._draining = threading.Event()
        self._draining.set()
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._drain, name=f"log shipper {path.name}", daemon=True
        )
        self._thread.start()

    def stall(self) -> None:
        """Stop draining, and fill the pipe: the worker's next warning blocks."""
        self._draining.clear()
        filler = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            with contextlib.suppress(BlockingIOError):
                while True:
                    os.write(filler, b"#" * 512 + b"\n")
        finally:
            os.close(filler)

    def resume(self) -> None:
        """Drain again (the worker's blocked warning goes through)."""
        self._draining.set()

    def close(self) -> None:
        self._closed.set()
        self._draining.set()
        self._thread.join(5.0)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._copy.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _drain(self) -> None:
        while not self._closed.is_set():
            self._draining.wait()
            if self._closed.is_set():
                return
            ready, _, _ = select.select([self._fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if data:
                self._copy.write(data)
                self._copy.flush()
            else:
                self._closed.wait(0.05)  # no writer now (between two workers): poll again
