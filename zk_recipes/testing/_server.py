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

Size: over the house limit (tests/test_module_sizes.py): one JVM's life
(start, stop, kill, pause, restart, its log, the four-letter words, its
sessions), shared by the standalone server and each ensemble member; the
ensemble itself is _cluster.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from mirakuru.exceptions import AlreadyRunning, ProcessExitedWithError, TimeoutExpired

from zk_recipes.testing._install import HarnessError, Installation, find_installation
from zk_recipes.testing._process import (
    _BIND_FAILURE,
    _HEX_ID,
    _MODE,
    _SID,
    DEFAULT_JVM_OPTIONS,
    HOST,
    MAIN_CLASS,
    _make_directory,
    _ms,
    _Options,
    _PortTaken,
    _process_stopped,
    _Resources,
    _serving,
    _ZooKeeperExecutor,
    four_letter_word,
    free_ports,
)
from zk_recipes.testing._proxy import TcpProxy

log = logging.getLogger("zk_recipes.testing")


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
        #: The AdminServer's HTTP port (``admin_server=True``), else None.
        self.admin_port: int | None = free_ports(1)[0] if options.admin_server else None

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
    def exit_status(self) -> str | None:
        """How the JVM ended ("exit code 14", "killed by SIGKILL"), or None if it has not."""
        executor = self._executor
        process = executor.process if executor is not None else None
        if process is None or process.poll() is None:
            return None
        code = process.returncode
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit code {code}"

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
            **self._admin_config(),
            "forceSync": "no",
        }
        if self._peers is not None:
            peers = self._peers()
            config.update(peers)
            if len(peers) == 1:
                config["standaloneEnabled"] = "false"  # a quorum of one, see ZooKeeperServer
        config.update(o.extra_config)
        return config

    def _admin_config(self) -> dict[str, str]:
        if self.admin_port is None:
            return {}
        return {
            "admin.enableServer": "true",
            "admin.serverAddress": self.host,
            "admin.serverPort": str(self.admin_port),
        }

    def _command(self) -> list[str]:
        o = self._options
        level = o.log_level.upper()
        props = {
            "zookeeper.extendedTypesEnabled": "true",
            "znode.container.checkIntervalMs": _ms(o.container_check_interval),
            "zookeeper.admin.enableServer": str(self.admin_port is not None).lower(),
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
        return self.tracked_session_ids() | self.connected_session_ids()

    def tracked_session_ids(self) -> set[int]:
        """Live sessions in the server's session tracker (``dump``), connected or not.

        Unlike ``session_ids`` this leaves out a connection that merely presents a
        session id, e.g. a client reconnecting with a session the server expired
        (it stays in ``cons`` until the server has answered it).
        """
        dump = self.four_letter("dump")
        tracker = dump.partition("SessionTracker dump:")[2].partition("ephemeral nodes dump:")[0]
        return {int(h, 16) for h in _HEX_ID.findall(tracker)}

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
    ``port`` given: serve clients on it (``HarnessError`` if it is taken) instead of a
    free port.

    By default the server runs as a quorum of one (``standaloneEnabled=false``;
    ``mode()`` says ``"leader"``), because ZooKeeper 3.8.0's standalone mode has a
    startup race: a request that arrives in the few milliseconds between the
    port opening and the database being created hits a NullPointerException on
    the server, and that connection is never answered nor closed, so a client
    reconnecting during a restart hangs for its whole connect timeout (often
    long enough to lose its session). A quorum peer loads its database before it
    opens the port. ``standalone_mode=True`` runs the real standalone mode anyway.

    ``admin_server=True`` starts ZooKeeper's AdminServer (HTTP, ``/commands/...``)
    on a free port of its own, ``admin_port``; the four-letter words stay on.
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
        port: int | None = None,
        admin_server: bool = False,
    ) -> None:
        if port is not None and (
            isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
        ):
            raise HarnessError(f"port must be a TCP port number from 1 to 65535, got {port!r}")
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
            admin_server=admin_server,
        )
        install = installation or find_installation()
        directory, owned = _make_directory(data_dir)
        resources = _Resources(directory if owned else None)
        ports = free_ports(3)
        if port is not None:
            ports[0] = port
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
        self._fixed_port = port is not None

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
                if self._served_once or self._fixed_port or attempt == 2:
                    raise
                ports = free_ports(3)
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
