"""Drive a real Curator 5.4 client from Python tests: the ``CuratorPeer`` JVM.

Design note. Interop tests put Apache Curator's own recipes on the same znodes
as ours. ``CuratorPeer.java`` (next to this file) is a line-oriented command
server: one command per line on stdin, exactly one reply line per command on
stdout (``OK``, ``OK <payload>`` or ``ERR <message>``), plus asynchronous
``EVENT <handle> <what>`` lines whenever a listener fires or a blocking acquire
finishes. Its header comment is the full protocol; in short::

    mutex|semmutex NAME PATH    rwlock NAME PATH (halves NAME.read, NAME.write)
    semaphore NAME PATH MAX     latch NAME PATH [ID]    selector NAME PATH [ID]
    sharedcount NAME PATH SEED  atomiclong NAME PATH
    acquire NAME                -> "pending", later EVENT NAME acquired <path>
    acquire NAME MS [QTY]       -> "acquired <path...>" | "timeout"
    release NAME   cancel NAME   participants NAME   isacquired NAME   close NAME
    hasleadership NAME   ourpath NAME   await NAME MS   yield NAME
    get NAME   set NAME V   trysetcount NAME OLD NEW   versioned NAME
    add NAME DELTA   cas NAME OLD NEW
    cache NAME PATH   cachedump NAME
    discovery NAME BASEPATH   register|update NAME HEXJSON   unregister NAME SERVICE ID
    query NAME SERVICE (hex instances)   instance NAME SERVICE ID   names NAME
    reserialize HEXJSON   servicecache NAME DISC SERVICE   cacheids NAME
    provider NAME DISC SERVICE roundrobin|random|sticky   pick NAME
    queue NAME plain|priority|delay|id PATH [LOCKPATH|-] [noconsumer]
                                -> EVENT NAME item <hex> per item consumed
    qput NAME HEX [PRIORITY|DELAYUNTILMS|ID]   qputmulti NAME HEX...   qremove NAME ID
    simple NAME PATH   soffer NAME HEX   stake NAME MS (hex | -)
    getdata PATH (hex)   children PATH   session (hex)   ping   closeclient   quit

Service instances cross the protocol as the hex of Curator's JSON bytes, queue
items as the hex of their bytes.

``build_curator_peer`` compiles the Java file, with the extra sources under
``java/`` (a stand-in for Spring Cloud's payload class), once (the ``curator_build``
fixture does it once per test session); ``CuratorPeer`` runs one JVM with one
CuratorFramework, i.e. one ZooKeeper session. One background thread reads the
JVM's stdout and sorts lines into replies (a queue that ``call`` takes from,
strictly one reply per command) and events (a list that ``wait_event`` searches
and consumes from, so unrelated events never get in the way). Every wait has a
deadline. A command whose reply does not come in time leaves the stream out of
step, so the peer refuses further commands (close it). The JVM quits when its
stdin closes, so it cannot outlive a test process that died; ``close`` and
``kill`` always reap it.

Errors: ``CuratorPeerError`` (an ``ERR`` reply, or the JVM is gone) with
``CuratorPeerTimeout`` beneath it (no reply or event in time);
``CuratorUnavailable`` (no Java, javac or Curator jars: the fixtures skip).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

from zk_recipes.testing import DEFAULT_JVM_OPTIONS

SOURCE = Path(__file__).with_name("CuratorPeer.java")
# Compiled with the peer: payload classes a Java service would have on its classpath, so
# Jackson can resolve a payload's "@class" (org/springframework/.../ZookeeperInstance.java).
EXTRA_SOURCES_DIR = Path(__file__).with_name("java")
MAIN_CLASS = "CuratorPeer"
DEBIAN_JAVA_DIR = Path("/usr/share/java")
INSTALL_HINT = (
    "apt-get install -y libcurator-recipes-java libcurator-framework-java libcurator-discovery-java"
)

# What Curator 5.4 loads at runtime (Debian's jars use unshaded Guava; the ZooKeeper
# client needs no netty: it talks NIO). The manifests' Class-Path would pull most of
# these in anyway; naming them keeps the lookup honest and the error precise.
REQUIRED_JARS: tuple[str, ...] = (
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
    # service discovery: curator-x-discovery and the Jackson it serializes instances with
    "curator-x-discovery.jar",
    "jackson-databind.jar",
    "jackson-core.jar",
    "jackson-annotations.jar",
)
# The first one found silences logging: nop drops it, simple is told to log warnings only.
LOGGING_JARS: tuple[str, ...] = ("slf4j-nop.jar", "slf4j-simple.jar")
JVM_OPTIONS: tuple[str, ...] = (
    *DEFAULT_JVM_OPTIONS,
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)


class CuratorUnavailable(Exception):
    """Java, javac or the Curator jars are missing; the message says what to install."""


class CuratorPeerError(Exception):
    """The peer answered ``ERR``, or it is gone (exited, killed, out of step)."""


class CuratorPeerTimeout(CuratorPeerError):
    """No reply, ``READY`` or matching event within the time allowed."""


class PeerFactory(Protocol):
    """The ``curator_peer_factory`` fixture: ``make(connect_string, session_timeout_ms)``."""

    def __call__(self, connect_string: str, session_timeout_ms: int = 4000) -> CuratorPeer: ...


@dataclass(frozen=True)
class CuratorBuild:
    """A compiled peer: run ``java -cp <classpath> CuratorPeer``."""

    java: Path
    classpath: str
    directory: Path


def _find_tool(name: str, environ: Mapping[str, str]) -> Path:
    java_home = environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name, path=environ.get("PATH"))
    if found is None:
        raise CuratorUnavailable(
            f"`{name}` was not found ($JAVA_HOME/bin or PATH); the Curator interop tests "
            f"compile and run a Java peer. Install a JDK: apt-get install -y default-jdk-headless"
        )
    return Path(found)


def curator_classpath(java_dir: Path = DEBIAN_JAVA_DIR) -> list[Path]:
    """The jars the peer runs with; raises ``CuratorUnavailable`` naming what is missing."""
    missing = [name for name in REQUIRED_JARS if not (java_dir / name).is_file()]
    if missing:
        raise CuratorUnavailable(
            f"Curator 5.4 jars not found in {java_dir} (missing: {', '.join(missing)}). "
            f"Install them, as root: {INSTALL_HINT} "
            "(this pulls in ZooKeeper, Guava, slf4j and Jackson too)"
        )
    jars = [java_dir / name for name in REQUIRED_JARS]
    for name in LOGGING_JARS:
        if (java_dir / name).is_file():
            jars.append(java_dir / name)
            break
    return jars


def peer_sources() -> list[Path]:
    """``CuratorPeer.java`` and the extra sources under ``java/``, in a stable order."""
    return [SOURCE, *sorted(EXTRA_SOURCES_DIR.rglob("*.java"))]


def build_curator_peer(
    directory: Path,
    *,
    java_dir: Path = DEBIAN_JAVA_DIR,
    environ: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> CuratorBuild:
    """Compile ``CuratorPeer.java`` (and ``peer_sources``' extras) into ``directory``
    and return how to run it.

    Raises ``CuratorUnavailable`` when Java or the jars are missing, and
    ``CuratorPeerError`` when javac fails (a bug in the Java file, not the machine).
    """
    env = os.environ if environ is None else environ
    jars = curator_classpath(java_dir)
    java = _find_tool("java", env)
    javac = _find_tool("javac", env)
    classpath = os.pathsep.join(str(jar) for jar in jars)
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        str(javac),
        "-nowarn",
        "-cp",
        classpath,
        "-d",
        str(directory),
        *(str(source) for source in peer_sources()),
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise CuratorPeerTimeout(f"javac did not finish within {timeout}s") from exc
    if result.returncode != 0:
        raise CuratorPeerError(
            f"javac failed ({result.returncode}):\n{result.stdout}{result.stderr}".rstrip()
        )
    return CuratorBuild(
        java=java, classpath=os.pathsep.join([classpath, str(directory)]), directory=directory
    )


class CuratorPeer:
    """One Curator 5.4 JVM (one CuratorFramework, one session), started by the constructor.

    ``call("mutex m /path")`` sends one command and returns the reply's payload
    (``""`` for a bare ``OK``); ``ERR`` raises ``CuratorPeerError``.
    ``wait_event(r"m acquired (.*)")`` returns (and consumes) the first event whose
    payload, the text after ``EVENT ``, fully matches the pattern.
    """

    def __init__(
        self,
        build: CuratorBuild,
        connect_string: str,
        session_timeout_ms: int = 4000,
        *,
        log_path: Path | None = None,
        start_timeout: float = 30.0,
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ) -> None:
        self.connect_string = connect_string
        self.session_timeout_ms = session_timeout_ms
        self.log_path = log_path
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._events: list[str] = []
        self._events_changed = threading.Condition()
        self._eof = False
        self._call_lock = threading.Lock()
        self._out_of_step: str | None = None
        self._closed = False
        command = [
            str(build.java),
            *jvm_options,
            "-cp",
            build.classpath,
            MAIN_CLASS,
            connect_string,
            str(session_timeout_ms),
        ]
        log: IO[bytes] | int = subprocess.DEVNULL
        if log_path is not None:
            log = log_path.open("wb")
        try:
            self._proc: subprocess.Popen[str] = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        finally:
            if not isinstance(log, int):
                log.close()  # the child holds its own descriptor
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._stdin: IO[str] = self._proc.stdin
        self._stdout: IO[str] = self._proc.stdout
        self._reader = threading.Thread(
            target=self._read, name=f"curator-peer-{self._proc.pid}", daemon=True
        )
        self._reader.start()
        try:
            self._await_ready(start_timeout)
        except BaseException:
            self.kill()
            self.close()
            raise

    # -- lifecycle

    def _await_ready(self, timeout: float) -> None:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise CuratorPeerTimeout(
                f"Curator peer printed no READY within {timeout}s{self._log_suffix()}"
            ) from None
        if line is None:
            raise CuratorPeerError(
                f"Curator peer exited before READY ({self._exit_code()}){self._log_suffix()}"
            )
        if line != "READY":
            raise CuratorPeerError(f"Curator peer did not start: {line}{self._log_suffix()}")

    def _read(self) -> None:
        try:
            for raw in self._stdout:
                line = raw.rstrip("\r\n")
                if line.startswith("EVENT "):
                    with self._events_changed:
                        self._events.append(line[len("EVENT ") :])
                        self._events_changed.notify_all()
                else:
                    self._replies.put(line)
        except (OSError, ValueError):
            pass  # stdout closed under us by close()
        finally:
            with self._events_changed:
                self._eof = True
                self._events_changed.notify_all()
            self._replies.put(None)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The JVM's exit status once it has ended (``-9`` after ``kill``), else None."""
        return self._proc.poll()

    def kill(self) -> None:
        """SIGKILL the JVM: its session is not closed, so its ephemeral nodes stay until
        the server expires the session (after ``session_timeout_ms``)."""
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10.0)

    def close(self, timeout: float = 5.0) -> None:
        """Send ``quit`` (the peer closes its client, ending the session), kill the JVM
        if it is still running after ``timeout``, and reap it. Never raises; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self._stdin.write("quit\n")
                self._stdin.flush()
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        self._reader.join(timeout=5.0)
        with contextlib.suppress(OSError, ValueError):
            self._stdout.close()
        self._proc.poll()

    def __enter__(self) -> CuratorPeer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self._proc.poll() is None else f"exited {self._proc.returncode}"
        return f"<CuratorPeer pid={self._proc.pid} {state} {self.connect_string}>"

    # -- commands and events

    def call(self, line: str, timeout: float = 10.0) -> str:
        """Send one command; return the payload of its ``OK`` reply (``""`` if none).

        Raises ``CuratorPeerError`` with the peer's message on ``ERR``, and
        ``CuratorPeerTimeout`` when no reply comes within ``timeout`` seconds (give a
        timed ``acquire NAME MS`` more than MS).
        """
        if "\n" in line or "\r" in line:
            raise ValueError(f"one command per call, without newlines: {line!r}")
        with self._call_lock:
            if self._closed:
                raise CuratorPeerError(f"{line!r}: the peer is closed")
            if self._out_of_step is not None:
                raise CuratorPeerError(
                    f"{line!r}: the peer is out of step since {self._out_of_step!r} got no "
                    "reply in time; close it"
                )
            if self._eof:
                raise CuratorPeerError(f"{line!r}: the peer has exited ({self._exit_code()})")
            try:
                self._stdin.write(line + "\n")
                self._stdin.flush()
            except (OSError, ValueError) as exc:
                raise CuratorPeerError(f"{line!r}: the peer is gone ({self._exit_code()})") from exc
            try:
                reply = self._replies.get(timeout=timeout)
            except queue.Empty:
                self._out_of_step = line
                raise CuratorPeerTimeout(
                    f"{line!r}: no reply within {timeout}s{self._log_suffix()}"
                ) from None
        if reply is None:
            raise CuratorPeerError(
                f"{line!r}: the peer exited ({self._exit_code()}){self._log_suffix()}"
            )
        if reply == "OK":
            return ""
        if reply.startswith("OK "):
            return reply[len("OK ") :]
        if reply.startswith("ERR"):
            raise CuratorPeerError(f"{line!r}: {reply[len('ERR ') :]}")
        raise CuratorPeerError(f"{line!r}: unexpected reply {reply!r}")

    def wait_event(self, pattern: str, timeout: float = 10.0) -> str:
        """Return and consume the oldest event whose payload fully matches ``pattern``.

        Raises ``CuratorPeerTimeout`` (listing the unconsumed events) when none comes
        within ``timeout`` seconds, ``CuratorPeerError`` if the peer exits first.
        """
        matcher = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._events_changed:
            while True:
                found = self._take_event(matcher)
                if found is not None:
                    return found
                if self._eof:
                    raise CuratorPeerError(
                        f"the peer exited ({self._exit_code()}) before an event matching "
                        f"{pattern!r}; unconsumed events: {self._events}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CuratorPeerTimeout(
                        f"no event matching {pattern!r} within {timeout}s; "
                        f"unconsumed events: {self._events}"
                    )
                self._events_changed.wait(remaining)

    def poll_event(self, pattern: str) -> str | None:
        """Like ``wait_event`` without waiting: the matching event, or None."""
        with self._events_changed:
            return self._take_event(re.compile(pattern))

    def events(self) -> list[str]:
        """The events not consumed yet, oldest first."""
        with self._events_changed:
            return list(self._events)

    def _take_event(self, matcher: re.Pattern[str]) -> str | None:
        for index, event in enumerate(self._events):
            if matcher.fullmatch(event):
                del self._events[index]
                return event
        return None

    def session_id(self) -> int:
        """The peer's ZooKeeper session id (compare with a znode's ``ephemeralOwner``)."""
        return int(self.call("session"), 16)

    # -- diagnostics

    def log_tail(self, lines: int = 30) -> str:
        """The end of the JVM's stderr, if it was sent to ``log_path``."""
        if self.log_path is None:
            return ""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _log_suffix(self) -> str:
        tail = self.log_tail()
        return f"\n--- peer stderr (tail) ---\n{tail}" if tail else ""

    def _exit_code(self) -> str:
        code = self._proc.poll()
        return "still running" if code is None else f"exit status {code}"
