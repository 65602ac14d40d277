"""The pieces every throwaway server is made of: ports, config, the JVM process.

Free loopback ports, four-letter words, the mirakuru executor that starts a
``QuorumPeerMain`` JVM and waits until it serves, and the private directory
each server lives in (swept of leftovers from killed runs).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mirakuru import Executor, SimpleExecutor
from mirakuru.base import ENV_UUID
from mirakuru.exceptions import AlreadyRunning

from zk_recipes import ConfigurationError
from zk_recipes.testing._install import HarnessError
from zk_recipes.testing._proxy import TcpProxy

log = logging.getLogger("zk_recipes.testing")

HOST = "127.0.0.1"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:-UsePerfData",
    "-Xms32m",
    "-Xmx512m",
    "-Djava.net.preferIPv4Stack=true",
)
_LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF")
_NOT_SERVING = "not currently serving requests"
_BIND_FAILURE = re.compile(r"Address already in use|BindException")
_SID = re.compile(r"sid=0x([0-9a-fA-F]+)")
_HEX_ID = re.compile(r"^\s*0x([0-9a-fA-F]+)\b", re.MULTILINE)
_MODE = re.compile(r"^Mode: (\w+)", re.MULTILINE)

_PR_SET_PDEATHSIG = 1
_LIBC: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class _Options:
    tick_time: float
    min_session_timeout: float
    max_session_timeout: float
    container_check_interval: float
    log_level: str
    extra_config: Mapping[str, str]
    jvm_options: tuple[str, ...]
    start_timeout: float
    init_limit: int
    sync_limit: int
    admin_server: bool = False

    def __post_init__(self) -> None:
        if self.log_level.upper() not in _LOG_LEVELS:
            raise ConfigurationError(
                f"log_level={self.log_level!r}: use one of {', '.join(_LOG_LEVELS)}"
            )
        if not 0 < self.tick_time <= self.min_session_timeout <= self.max_session_timeout:
            raise ConfigurationError(
                "need 0 < tick_time <= min_session_timeout <= max_session_timeout, got "
                f"{self.tick_time}, {self.min_session_timeout}, {self.max_session_timeout}"
            )


def _ms(seconds: float) -> str:
    return str(max(1, round(seconds * 1000)))


# -- four-letter words, ports, processes ---------------------------------------------------


def four_letter_word(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``cons``, ...); return the answer."""
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            while True:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
    except OSError as exc:
        raise HarnessError(f"four-letter word {command!r} to {host}:{port} failed: {exc}") from exc
    return b"".join(chunks).decode("utf-8", "replace")


def _ephemeral_port_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int = 1) -> list[int]:
    """``count`` free loopback ports for servers of a test (ZooKeeper, a broker, ...).

    Picked *below* the ephemeral range, so that no client socket can grab one
    while its server restarts. Free when picked: a server that fails to bind
    should pick again.
    """
    floor = _ephemeral_port_floor()
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            port = random.randrange(10000, floor) if floor > 12000 else 0
            try:
                sock.bind((HOST, port))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        return [s.getsockname()[1] for s in held]
    finally:
        for sock in held:
            sock.close()


def _port_accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def _process_stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] in ("T", "t")


def _preexec_for_main_thread() -> Callable[[], None]:
    parent = os.getpid()

    def new_session_dying_with_parent() -> None:  # runs in the child, between fork and exec
        os.setsid()
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    return new_session_dying_with_parent


class _ZooKeeperExecutor(Executor):
    """mirakuru executor whose readiness is "ruok says imok and srvr says serving"."""

    def __init__(
        self, command: list[str], *, port: int, log_file: IO[bytes], timeout: float
    ) -> None:
        super().__init__(
            command,
            timeout=timeout,
            sleep=0.05,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        self.port = port
        self._main_thread = threading.current_thread() is threading.main_thread()

    @property
    def _popen_kwargs(self) -> dict[str, Any]:
        kwargs = super()._popen_kwargs
        # mirakuru marks its children with ``mirakuru_uuid=<pid>:<uuid4>``, and
        # every Python process that imported mirakuru SIGKILLs, at exit, each
        # process whose mark CONTAINS its own pid as a substring. Once pids wrap
        # (pid_max 32768), any exiting test subprocess whose pid appears in the
        # mark kills our JVM: the shared server died silently mid-run this way.
        # The JVM has no children to find by the mark; the process group, the
        # parent-death signal and our finalizer stop it.
        env = dict(kwargs.get("env") or os.environ)
        env.pop(ENV_UUID, None)
        kwargs["env"] = env
        if self._main_thread:
            kwargs["preexec_fn"] = _preexec_for_main_thread()
        return kwargs

    def pre_start_check(self) -> bool:
        return _port_accepts(self.port)

    def after_start_check(self) -> bool:
        return _serving(self.port)

    def spawn(self) -> None:
        """Start the JVM without waiting (so an ensemble's JVMs boot in parallel)."""
        if self.pre_start_check():
            raise AlreadyRunning(self)
        SimpleExecutor.start(self)

    def wait_ready(self) -> None:
        self.wait_for(self.check_subprocess)


def _serving(port: int) -> bool:
    try:
        return four_letter_word(
            HOST, port, "ruok", 1.0
        ).strip() == "imok" and _NOT_SERVING not in four_letter_word(HOST, port, "srvr", 1.0)
    except HarnessError:
        return False


class _PortTaken(HarnessError):
    """A port was taken between picking it and the JVM binding it (retried once)."""


@dataclass
class _Resources:
    """What must be released even if the owner is never closed: JVMs, proxies, temp dir.

    Held by ``weakref.finalize``, so it must not refer back to its owner.
    """

    directory: Path | None
    executors: dict[str, _ZooKeeperExecutor] = field(default_factory=dict)
    proxies: list[TcpProxy] = field(default_factory=list)

    def release(self) -> None:
        for executor in list(self.executors.values()):
            with contextlib.suppress(Exception):
                executor.kill()
        self.executors.clear()
        for proxy in self.proxies:
            proxy.close()
        self.proxies.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


_OWNER_FILE = "owner.pid"


def _make_directory(data_dir: str | os.PathLike[str] | None) -> tuple[Path, bool]:
    if data_dir is not None:
        path = Path(data_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path, False
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None
    _sweep_stale_directories(parent or Path(tempfile.gettempdir()))
    path = Path(tempfile.mkdtemp(prefix="zk-recipes-", dir=parent))
    (path / _OWNER_FILE).write_text(f"{os.getpid()}\n")
    return path, True


def _sweep_stale_directories(parent: Path) -> None:
    """Remove temp dirs left by killed test runs (their owner process is gone)."""
    for candidate in parent.glob("zk-recipes-*"):
        try:
            owner = int((candidate / _OWNER_FILE).read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(candidate, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours to judge: no owner file, or owner alive under another user


# -- one server process ---------------------------------------------------------------------
