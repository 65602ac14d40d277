"""Throwaway ZooKeeper servers for tests: one server, or an ensemble.

Each server is a real ZooKeeper 3.8 JVM (``QuorumPeerMain``) started with
mirakuru, listening on 127.0.0.1 only, in a private directory (on ``/dev/shm``
when it is writable: tmpfs makes the transaction log cheap)::

    <dir>/zoo.cfg          written before every start
    <dir>/data/            dataDir (``myid`` for ensemble members); kept across restarts
    <dir>/zookeeper.log    the JVM's stdout+stderr, appended across restarts

Readiness is ``ruok`` answering ``imok`` *and* ``srvr`` not saying "not currently
serving requests", so a member is ready only once it has joined a quorum. A
single ``ZooKeeperServer`` is a quorum of one by default, not ZooKeeper's
standalone mode, whose startup race can leave a reconnecting client hanging
(see ``ZooKeeperServer``).
``restart()`` reuses the port and the data directory, so data and sessions
survive it exactly as they survive a real server restart.

Fault verbs, the same on a standalone server and on every ensemble member
(Curator's ``TestingServer``/``TestingCluster`` give ``stop``/``restart``/``kill``):
``stop`` (SIGTERM), ``kill`` (SIGKILL), ``pause``/``resume`` (SIGSTOP/SIGCONT: the
kernel still accepts TCP connections, nothing answers), ``restart``.
Introspection over four-letter words: ``mode()``, ``session_ids()`` (sessions the
server's session tracker knows, connected or not), ``connected_session_ids()``
(sessions with a connection to *this* server; ``ZooKeeperCluster.server_for_session``
uses it like Curator's ``findConnectionInstance``).

No JVM outlives the test run: every server's resources are released by a
``weakref.finalize`` (run at interpreter exit, too), and on Linux a JVM started
from the main thread gets ``PR_SET_PDEATHSIG=SIGKILL``, so it dies with the Python
process even when that is killed outright. Not from other threads: the kernel
ties the signal to the forking *thread*, and a JVM must not die with a worker.
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
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from mirakuru import Executor, SimpleExecutor
from mirakuru.exceptions import AlreadyRunning, ProcessExitedWithError, TimeoutExpired

from zk_recipes._errors import ConfigurationError
from zk_recipes.testing._install import HarnessError, Installation, find_installation
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


def _pick_ports(count: int) -> list[int]:
    """Free ports *below* the ephemeral range, so no client socket can grab one across a restart."""
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


class _ServerBase:
    """One ZooKeeper JVM: config, process control and four-letter-word introspection."""

    host = HOST

    def __init__(
        self,
        *,
        name: str,
        directory: Path,
        ports: tuple[int, int, int],
        myid: int,
        peers: Callable[[], dict[str, str]] | None,
        options: _Options,
        installation: Installation,
        resources: _Resources,
    ) -> None:
        self._name = name
        self._dir = directory
        self._port, self.peer_port, self.election_port = ports
        self.myid = myid
        self._peers = peers
        self._options = options
        self._install = installation
        self._resources = resources
        self._paused = False
        self._log_offset = 0

    # -- identity

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self._port}"

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def data_dir(self) -> Path:
        return self._dir / "data"

    @property
    def log_path(self) -> Path:
        return self._dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        executor = self._executor
        return executor.process.pid if executor is not None and executor.process else None

    @property
    def is_running(self) -> bool:
        """The JVM process is alive (a paused one is too)."""
        executor = self._executor
        return executor is not None and executor.running()

    @property
    def is_paused(self) -> bool:
        return self._paused and self.is_running

    def __repr__(self) -> str:
        state = "paused" if self.is_paused else "running" if self.is_running else "stopped"
        return f"<{type(self).__name__} {self._name} {self.connect_string} {state}>"

    def log_tail(self, lines: int = 50) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- process control

    @property
    def _executor(self) -> _ZooKeeperExecutor | None:
        return self._resources.executors.get(self._name)

    def _set_ports(self, ports: tuple[int, int, int]) -> None:
        self._port, self.peer_port, self.election_port = ports

    def _config(self) -> dict[str, str]:
        o = self._options
        config = {
            "tickTime": _ms(o.tick_time),
            "minSessionTimeout": _ms(o.min_session_timeout),
            "maxSessionTimeout": _ms(o.max_session_timeout),
            "initLimit": str(o.init_limit),
            "syncLimit": str(o.sync_limit),
            "dataDir": str(self.data_dir),
            "clientPort": str(self._port),
            "clientPortAddress": self.host,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "forceSync": "no",
        }
        if self._peers is not None:
            peers = self._peers()
            config.update(peers)
            if len(peers) == 1:
                config["standaloneEnabled"] = "false"  # a quorum of one, see ZooKeeperServer
        config.update(o.extra_config)
        return config

    def _command(self) -> list[str]:
        o = self._options
        level = o.log_level.upper()
        props = {
            "zookeeper.extendedTypesEnabled": "true",
            "znode.container.checkIntervalMs": _ms(o.container_check_interval),
            "zookeeper.admin.enableServer": "false",
            # 1 MB transaction-log preallocation instead of 64 MB: tmpfs is RAM.
            "zookeeper.preAllocSize": "1024",
            # Election connections to a paused peer time out after 1 s, not 5 s.
            "zookeeper.cnxTimeout": "1000",
            "zookeeper.jmx.log4j.disable": "true",
            "org.slf4j.simpleLogger.defaultLogLevel": level.lower(),
            "org.slf4j.simpleLogger.showDateTime": "true",
            "org.slf4j.simpleLogger.dateTimeFormat": "HH:mm:ss.SSS",
        }
        if level == "WARN":  # every client disconnect is a WARN with a stack trace there
            props["org.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn"] = "error"
        if self._install.uses_logback:
            props["logback.configurationFile"] = str(self._dir / "logback.xml")
        return [
            str(self._install.java),
            *o.jvm_options,
            *(f"-D{key}={value}" for key, value in props.items()),
            "-cp",
            self._install.classpath_string,
            MAIN_CLASS,
            str(self._dir / "zoo.cfg"),
        ]

    def _write_files(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._peers is not None:
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        lines = [f"{key}={value}" for key, value in self._config().items()]
        (self._dir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        if self._install.uses_logback:
            level = self._options.log_level.upper()
            quiet = "ERROR" if level == "WARN" else level
            (self._dir / "logback.xml").write_text(
                "<configuration>\n"
                '  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">\n'
                "    <encoder><pattern>%d{HH:mm:ss.SSS} [%thread] %-5level %logger - %msg%n"
                "</pattern></encoder>\n"
                "  </appender>\n"
                f'  <logger name="org.apache.zookeeper.server.NIOServerCnxn" level="{quiet}"/>\n'
                f'  <root level="{level}"><appender-ref ref="OUT"/></root>\n'
                "</configuration>\n"
            )

    def _spawn(self) -> None:
        if self.is_running:
            raise HarnessError(f"{self!r} is already running")
        self._write_files()
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0
        with self.log_path.open("ab") as log_file:
            executor = _ZooKeeperExecutor(
                self._command(),
                port=self._port,
                log_file=log_file,
                timeout=self._options.start_timeout,
            )
            try:
                executor.spawn()
            except AlreadyRunning as exc:
                raise _PortTaken(f"port {self._port} is already taken") from exc
        self._resources.executors[self._name] = executor
        self._paused = False
        log.debug("spawned %r (pid %s)", self, self.pid)

    def _await_ready(self) -> None:
        executor = self._executor
        if executor is None:
            raise HarnessError(f"{self!r} was not started")
        try:
            executor.wait_ready()
        except TimeoutExpired as exc:
            self._forget_process()
            raise HarnessError(
                f"{self!r} did not serve within {self._options.start_timeout} s; "
                f"last 40 lines of {self.log_path}:\n{self.log_tail(40)}"
            ) from exc
        except ProcessExitedWithError as exc:
            self._forget_process()
            if _BIND_FAILURE.search(self._log_since_spawn()):
                raise _PortTaken(f"{self!r}: a port was taken") from exc
            raise HarnessError(
                f"{self!r} exited with code {exc.exit_code} while starting; "
                f"last 40 lines of {self.log_path}:\n{self.log_tail(40)}"
            ) from exc

    def _log_since_spawn(self) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _forget_process(self) -> None:
        executor = self._resources.executors.pop(self._name, None)
        if executor is not None:
            with contextlib.suppress(Exception):
                executor.kill()
        self._paused = False

    def _start(self) -> None:
        self._spawn()
        self._await_ready()

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM), waiting up to ``timeout`` before SIGKILL. No-op if stopped."""
        executor = self._executor
        if executor is None:
            return
        process = executor.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
                if self._paused:  # SIGTERM stays pending on a stopped process until SIGCONT
                    os.killpg(process.pid, signal.SIGCONT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
        self._forget_process()
        log.debug("stopped %r", self)

    def kill(self) -> None:
        """SIGKILL the JVM and wait for it: a crash, no goodbye to clients or peers."""
        self._forget_process()
        log.debug("killed %r", self)

    def pause(self) -> None:
        """SIGSTOP the JVM: connections stay open, nothing answers, timers freeze."""
        self._signal(signal.SIGSTOP)
        self._paused = True
        self._wait_until(lambda: _process_stopped(self.pid or 0), "to pause")

    def resume(self) -> None:
        """SIGCONT a paused JVM. On waking, it expires sessions whose deadline passed."""
        self._signal(signal.SIGCONT)
        self._paused = False
        self._wait_until(lambda: not _process_stopped(self.pid or 0), "to resume")

    def _signal(self, signum: int) -> None:
        pid = self.pid
        if pid is None or not self.is_running:
            raise HarnessError(f"{self!r} is not running")
        os.kill(pid, signum)

    def _wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise HarnessError(f"{self!r} did not manage {what} within {timeout} s")
            time.sleep(0.01)

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or kill) and start again on the same port and data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def start(self) -> None:
        """Start the JVM and wait until it serves requests; resume it if paused."""
        if self.is_paused:
            self.resume()
        elif not self.is_running:
            self._start()

    # -- introspection

    def four_letter(self, command: str, timeout: float = 2.0) -> str:
        """Raw four-letter word over a socket (``ruok``, ``srvr``, ``cons``, ``dump``...)."""
        return four_letter_word(self.host, self._port, command, timeout)

    def is_serving(self) -> bool:
        return self.is_running and not self._paused and _serving(self._port)

    def wait_serving(self, timeout: float = 30.0) -> None:
        """Wait until the server answers requests (a member: until it is in a quorum)."""
        deadline = time.monotonic() + timeout
        while not self.is_serving():
            if not self.is_running:
                raise HarnessError(f"{self!r} is not running; last lines:\n{self.log_tail(40)}")
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{self!r} not serving after {timeout} s; last 40 lines of "
                    f"{self.log_path}:\n{self.log_tail(40)}"
                )
            time.sleep(0.05)

    def mode(self) -> str:
        """``"standalone"``, ``"leader"``, ``"follower"`` (or ``"observer"``), from ``srvr``."""
        answer = self.four_letter("srvr")
        match = _MODE.search(answer)
        if match is None:
            raise HarnessError(f"{self!r} is not serving: {answer.strip()[:200]}")
        return match.group(1)

    def session_ids(self) -> set[int]:
        """Sessions this server knows: its session tracker (``dump``) plus its connections.

        The tracker lists every live global session, connected or not: a session
        whose client vanished (or was expired only locally) stays listed until the
        server times it out. A leader lists them by expiry bucket, a follower as
        "Global Sessions"; both are parsed. Use ``connected_session_ids`` to know
        whether a client is connected *here*.
        """
        dump = self.four_letter("dump")
        tracker = dump.partition("SessionTracker dump:")[2].partition("ephemeral nodes dump:")[0]
        return {int(h, 16) for h in _HEX_ID.findall(tracker)} | self.connected_session_ids()

    def connected_session_ids(self) -> set[int]:
        """Sessions with an open client connection to this server (``cons``, ``sid=0x...``)."""
        return {int(h, 16) for h in _SID.findall(self.four_letter("cons"))}

    def proxy(self) -> TcpProxy:
        """A ``TcpProxy`` in front of this server, closed with the server (or cluster)."""
        proxy = TcpProxy(self.host, self._port)
        self._resources.proxies.append(proxy)
        return proxy


# -- standalone ------------------------------------------------------------------------------


class ZooKeeperServer(_ServerBase):
    """One ZooKeeper 3.8 server on a free 127.0.0.1 port (Curator's ``TestingServer``).

    ``with ZooKeeperServer() as zk: KazooClient(zk.connect_string)``. Times are seconds.
    ``data_dir`` given: use it and keep it; otherwise a temp dir removed by ``close()``.

    By default the server runs as a quorum of one (``standaloneEnabled=false``;
    ``mode()`` says ``"leader"``), because ZooKeeper 3.8.0's standalone mode has a
    startup race: a request that arrives in the few milliseconds between the
    port opening and the database being created hits a NullPointerException on
    the server, and that connection is never answered nor closed, so a client
    reconnecting during a restart hangs for its whole connect timeout (often
    long enough to lose its session). A quorum peer loads its database before it
    opens the port. ``standalone_mode=True`` runs the real standalone mode anyway.
    """

    def __init__(
        self,
        *,
        tick_time: float = 0.2,
        min_session_timeout: float = 0.4,
        max_session_timeout: float = 60.0,
        container_check_interval: float = 0.1,
        log_level: str = "WARN",
        extra_config: Mapping[str, str] | None = None,
        jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS,
        data_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        init_limit: int = 10,
        sync_limit: int = 5,
        standalone_mode: bool = False,
        installation: Installation | None = None,
    ) -> None:
        options = _Options(
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            container_check_interval=container_check_interval,
            log_level=log_level,
            extra_config=dict(extra_config or {}),
            jvm_options=tuple(jvm_options),
            start_timeout=start_timeout,
            init_limit=init_limit,
            sync_limit=sync_limit,
        )
        install = installation or find_installation()
        directory, owned = _make_directory(data_dir)
        resources = _Resources(directory if owned else None)
        ports = _pick_ports(3)
        super().__init__(
            name="standalone" if standalone_mode else "server.1",
            directory=directory,
            ports=(ports[0], ports[1], ports[2]),
            myid=1,
            peers=None if standalone_mode else self._peer_line,
            options=options,
            installation=install,
            resources=resources,
        )
        self._finalizer = weakref.finalize(self, resources.release)
        self._owned = owned
        self._served_once = False

    def _start(self) -> None:
        if not self._finalizer.alive:
            raise HarnessError(f"{self!r} is closed")
        for attempt in (1, 2):
            try:
                self._spawn()
                self._await_ready()
                self._served_once = True
                return
            except _PortTaken:
                # Clients may know the port once it has served: never move it then.
                if self._served_once or attempt == 2:
                    raise
                ports = _pick_ports(3)
                self._set_ports((ports[0], ports[1], ports[2]))

    def _peer_line(self) -> dict[str, str]:
        return {"server.1": f"{self.host}:{self.peer_port}:{self.election_port}"}

    def close(self) -> None:
        """Stop the JVM (killed when its temp dir is discarded anyway) and remove the temp dir."""
        if not self._finalizer.alive:
            return
        if self._owned:
            self.kill()
        else:
            self.stop()
        self._finalizer()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- ensemble ------------------------------------------------------------------------------


class ClusterMember(_ServerBase):
    """One server of a ``ZooKeeperCluster``, with the same verbs as ``ZooKeeperServer``."""

    def __init__(
        self,
        *,
        myid: int,
        ports: tuple[int, int, int],
        peers: Callable[[], dict[str, str]],
        directory: Path,
        options: _Options,
        installation: Installation,
        resources: _Resources,
    ) -> None:
        super().__init__(
            name=f"server.{myid}",
            directory=directory,
            ports=ports,
            myid=myid,
            peers=peers,
            options=options,
            installation=installation,
            resources=resources,
        )


class ZooKeeperCluster:
    """``size`` ZooKeeper servers on loopback forming one quorum (Curator's ``TestingCluster``).

    Takes the same options as ``ZooKeeperServer``; ``init_limit``/``sync_limit``
    default a little higher so a busy 2-core machine does not lose its leader.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time: float = 0.2,
        min_session_timeout: float = 0.4,
        max_session_timeout: float = 60.0,
        container_check_interval: float = 0.1,
        log_level: str = "WARN",
        extra_config: Mapping[str, str] | None = None,
        jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS,
        data_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        init_limit: int = 20,
        sync_limit: int = 10,
        installation: Installation | None = None,
    ) -> None:
        if size < 2:
            raise ConfigurationError(
                f"size={size}: an ensemble needs 2+ servers; use ZooKeeperServer"
            )
        options = _Options(
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            container_check_interval=container_check_interval,
            log_level=log_level,
            extra_config=dict(extra_config or {}),
            jvm_options=tuple(jvm_options),
            start_timeout=start_timeout,
            init_limit=init_limit,
            sync_limit=sync_limit,
        )
        install = installation or find_installation()
        directory, owned = _make_directory(data_dir)
        self._resources = _Resources(directory if owned else None)
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._owned = owned
        self._started_once = False
        ports = _pick_ports(3 * size)
        self.servers: list[ClusterMember] = [
            ClusterMember(
                myid=i + 1,
                ports=(ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]),
                peers=self._peer_lines,
                directory=directory / f"server-{i + 1}",
                options=options,
                installation=install,
                resources=self._resources,
            )
            for i in range(size)
        ]

    def __repr__(self) -> str:
        return f"<ZooKeeperCluster {self.servers!r}>"

    def _peer_lines(self) -> dict[str, str]:
        return {f"server.{m.myid}": f"{HOST}:{m.peer_port}:{m.election_port}" for m in self.servers}

    @property
    def connect_string(self) -> str:
        return ",".join(m.connect_string for m in self.servers)

    @property
    def quorum_size(self) -> int:
        return len(self.servers) // 2 + 1

    def start(self) -> None:
        """Start every stopped member at once (resume paused ones), then wait for a quorum."""
        if not self._finalizer.alive:
            raise HarnessError(f"{self!r} is closed")
        for member in self.servers:
            if member.is_paused:
                member.resume()
        for attempt in (1, 2):
            members = [m for m in self.servers if not m.is_running]
            try:
                for member in members:
                    member._spawn()
                for member in members:
                    member._await_ready()
            except _PortTaken:
                for member in members:
                    member.kill()
                if self._started_once or attempt == 2:
                    raise
                ports = _pick_ports(3 * len(self.servers))
                for i, member in enumerate(self.servers):
                    member._set_ports((ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]))
                continue
            except BaseException:
                for member in members:
                    member.kill()
                raise
            self._started_once = True
            self.wait_for_quorum(self.servers[0]._options.start_timeout)
            return

    def stop(self) -> None:
        """Stop every member gracefully."""
        for member in self.servers:
            member.stop()

    def _quorum_problem(self) -> tuple[ClusterMember | None, str]:
        live = [m for m in self.servers if m.is_running and not m.is_paused]
        if len(live) < self.quorum_size:
            return None, f"only {len(live)} of {len(self.servers)} servers running"
        leaders = []
        for member in live:
            try:
                mode = member.mode()
            except HarnessError:
                return None, f"{member!r} is not serving"
            if mode == "leader":
                leaders.append(member)
        if len(leaders) != 1:
            return None, f"{len(leaders)} leaders among {live!r}"
        return leaders[0], ""

    def wait_for_quorum(self, timeout: float = 30.0) -> ClusterMember:
        """Wait until every running member serves and exactly one leads; return the leader."""
        deadline = time.monotonic() + timeout
        while True:
            leader, problem = self._quorum_problem()
            if leader is not None:
                return leader
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {m!r} {m.log_path}:\n{m.log_tail(15)}" for m in self.servers
                )
                raise HarnessError(f"no quorum within {timeout} s: {problem}\n{tails}")
            time.sleep(0.05)

    def leader(self) -> ClusterMember:
        """The member that leads right now (``HarnessError`` if none or several)."""
        leader, problem = self._quorum_problem()
        if leader is None:
            raise HarnessError(f"no single leader: {problem}")
        return leader

    def followers(self) -> list[ClusterMember]:
        leader = self.leader()
        return [m for m in self.servers if m is not leader and m.is_running]

    def server_for_session(self, session_id: int) -> ClusterMember | None:
        """The member a client with this session id is connected to, or None."""
        for member in self.servers:
            if member.is_running and not member.is_paused:
                try:
                    if session_id in member.connected_session_ids():
                        return member
                except HarnessError:
                    continue
        return None

    def proxies(self) -> list[TcpProxy]:
        """One new ``TcpProxy`` per member (in ``servers`` order), closed with the cluster."""
        return [member.proxy() for member in self.servers]

    def close(self) -> None:
        """Kill every member (killed when the temp dir is discarded anyway) and clean up."""
        if not self._finalizer.alive:
            return
        for member in self.servers:
            if self._owned:
                member.kill()
            else:
                member.stop()
        self._finalizer()

    def __enter__(self) -> ZooKeeperCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "ClusterMember",
    "ZooKeeperCluster",
    "ZooKeeperServer",
    "four_letter_word",
]
