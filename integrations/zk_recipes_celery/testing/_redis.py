"""A throwaway redis-server on loopback: the broker for Celery tests with real workers.

Not ZooKeeper, so not in ``zk_recipes.testing``, but what a test of
``@singleton_task`` or beat HA needs beside it: real workers against a real
broker (no mocks), and Redis is the broker most projects use. Uses Debian's
``redis-server`` (or ``$REDIS_SERVER``), persists nothing, and speaks just
enough RESP (PING, FLUSHALL) to need no client library.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from zk_recipes.testing import HarnessError, free_ports

_POLL = 0.05


def find_redis_server() -> str:
    """The redis-server binary: ``$REDIS_SERVER``, else the one on PATH."""
    found = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not found or not os.access(found, os.X_OK):
        raise HarnessError(
            "redis-server not found: install it (apt-get install -y redis-server; "
            "scripts/bootstrap.sh does) or set REDIS_SERVER to its path"
        )
    return found


class RedisServer:
    """``with RedisServer() as redis: Celery(broker=redis.url)``; stopped on exit."""

    def __init__(self, directory: Path | None = None, *, start_timeout: float = 10.0) -> None:
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="zk-recipes-redis-"))
        self.start_timeout = start_timeout
        self.port = 0
        self.log_path = self.directory / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>`` (append ``/0`` for a database)."""
        return f"redis://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> RedisServer:
        """Start on a free port (again on a port race); HarnessError with the log if it fails."""
        binary = find_redis_server()
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(attempts):
            self.port = free_ports(1)[0]
            argv = [
                binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.directory),
                "--daemonize", "no",
            ]  # fmt: skip
            with self.log_path.open("ab") as log:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            if self._wait_ping(self.start_timeout):
                return self
            self._stop_process()  # keep the directory (and the log) for the next attempt
        tail = self.log_path.read_text(errors="replace").splitlines()[-40:]
        raise HarnessError("redis-server did not answer PING; its log ends:\n" + "\n".join(tail))

    def command(self, *words: str, timeout: float = 5.0) -> bytes:
        """Send one command, return the raw reply line (e.g. ``b"+PONG"``)."""
        payload = f"*{len(words)}\r\n".encode() + b"".join(
            f"${len(w.encode())}\r\n{w}\r\n".encode() for w in words
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(payload)
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        return reply.strip()

    def flushall(self) -> None:
        """Empty every database (between tests)."""
        reply = self.command("FLUSHALL")
        if reply != b"+OK":
            raise HarnessError(f"redis FLUSHALL answered {reply!r}")

    def _wait_ping(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._proc is not None and self._proc.poll() is None:
            try:
                if self.command("PING", timeout=0.5) == b"+PONG":
                    return True
            except OSError:
                pass
            time.sleep(_POLL)
        return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove a directory we made. Idempotent."""
        self._stop_process(timeout)
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)
            self._own_dir = False

    def _stop_process(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
