"""Find a ZooKeeper installation and a Java runtime to run it with.

The harness runs the real ZooKeeper server (``QuorumPeerMain``) in a JVM, so it
needs two things from the machine, looked up in this order:

1. ZooKeeper jars. ``ZOOKEEPER_HOME`` wins when it is set: an unpacked upstream
   ``apache-zookeeper-3.x-bin`` directory, whose ``lib/`` holds every jar (its
   ``conf/`` is never read: the harness writes its own config). Pointing it at
   the ``lib/`` folder itself also works. A set but wrong ``ZOOKEEPER_HOME`` is
   an error, not a reason to fall back, so a CI setting cannot silently test
   another version. Otherwise Debian's ``/usr/share/java/zookeeper.jar``, whose
   manifest ``Class-Path`` pulls in its dependencies.
2. ``java``: ``$JAVA_HOME/bin/java``, else the first ``java`` on ``PATH``.

Logging: ZooKeeper logs through slf4j. The upstream tarball ships logback, which
the harness configures with a file it writes; otherwise ``slf4j-simple`` (from
``lib/`` or Debian's ``/usr/share/java/slf4j-simple.jar``) is added so log lines
reach the server's log file instead of vanishing into slf4j's no-op binding.

The lookup is cached per environment (``ZOOKEEPER_HOME``, ``JAVA_HOME``, ``PATH``).

The harness's errors live here too, the root module of the testing package::

    ZkRecipesError
    └── HarnessError                 a test server, cluster or proxy misbehaved
        └── ZooKeeperNotFoundError   no ZooKeeper jars; the message says what to install
            └── JavaNotFoundError    no Java runtime; the message says what to install
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zk_recipes import ZkRecipesError

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
# The servlet API, which the AdminServer's Jetty needs and Debian's zookeeper.jar
# does not name in its Class-Path (without it: "Unable to load jetty").
DEBIAN_SERVLET_API_JAR = Path("/usr/share/java/servlet-api.jar")

_ZOOKEEPER_JAR = re.compile(r"^zookeeper(-\d[\w.\-]*)?\.jar$")
_NOT_SERVER_JAR = re.compile(r"-(jute|tests|sources|javadoc)\b")

_INSTALL_ZOOKEEPER = (
    "Install ZooKeeper with one of:\n"
    "  - Debian/Ubuntu, as root: apt-get install -y zookeeper\n"
    "  - anywhere: unpack apache-zookeeper-3.8.x-bin.tar.gz and set ZOOKEEPER_HOME to the\n"
    "    unpacked apache-zookeeper-3.8.x-bin directory (the one holding lib/)"
)
_INSTALL_JAVA = (
    "Install a Java runtime (11 or newer) with one of:\n"
    "  - Debian/Ubuntu, as root: apt-get install -y default-jre-headless\n"
    "  - anywhere: set JAVA_HOME to a JDK/JRE directory (the one holding bin/java)"
)


class HarnessError(ZkRecipesError):
    """A test ZooKeeper server, cluster or proxy failed; the message carries its log tail."""


class ZooKeeperNotFoundError(HarnessError):
    """No ZooKeeper installation was found; the message says what to install."""


class JavaNotFoundError(ZooKeeperNotFoundError):
    """No Java runtime was found to run ZooKeeper with; the message says what to install."""


@dataclass(frozen=True)
class Installation:
    """What the harness runs: a ``java`` binary and the jars of one ZooKeeper version."""

    java: Path
    zookeeper_jar: Path
    classpath: tuple[Path, ...]
    source: str
    """``"ZOOKEEPER_HOME"`` or ``"debian"``."""
    uses_logback: bool
    """True when logback is the slf4j binding (upstream tarball): configure it with a file."""

    @property
    def classpath_string(self) -> str:
        return os.pathsep.join(str(p) for p in self.classpath)

    @functools.cached_property
    def zookeeper_version(self) -> str:
        """The server jar's version (``3.8.0``), from its Maven properties; ``?`` if unknown."""
        try:
            with zipfile.ZipFile(self.zookeeper_jar) as jar:
                for name in jar.namelist():
                    if name.endswith("/zookeeper/pom.properties"):
                        for line in jar.read(name).decode("utf-8", "replace").splitlines():
                            if line.startswith("version="):
                                return line.partition("=")[2].strip()
        except (OSError, zipfile.BadZipFile):
            pass
        match = re.search(r"(\d+\.\d+\.\d+)", self.zookeeper_jar.resolve().name)
        return match.group(1) if match else "?"

    @functools.cached_property
    def java_version(self) -> str:
        """What ``java -version`` says (``17.0.15``); ``?`` if it does not answer."""
        try:
            answer = subprocess.run(
                [str(self.java), "-version"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return "?"
        match = re.search(r'version "([^"]+)"', answer.stderr + answer.stdout)
        return match.group(1) if match else "?"


def find_installation(
    *,
    environ: Mapping[str, str] | None = None,
    debian_jar: Path | None = DEBIAN_ZOOKEEPER_JAR,
    debian_slf4j_simple: Path | None = DEBIAN_SLF4J_SIMPLE_JAR,
) -> Installation:
    """Return the ZooKeeper installation and Java runtime to use (cached).

    ``environ`` defaults to ``os.environ``. ``debian_jar=None`` turns off the
    Debian fallback (tests use it to see the error message).

    Raises ``ZooKeeperNotFoundError`` or ``JavaNotFoundError`` saying what to install.
    """
    env = os.environ if environ is None else environ
    return _lookup(
        env.get("ZOOKEEPER_HOME") or None,
        env.get("JAVA_HOME") or None,
        env.get("PATH", os.defpath),
        debian_jar,
        debian_slf4j_simple,
    )


@functools.lru_cache(maxsize=8)
def _lookup(
    zookeeper_home: str | None,
    java_home: str | None,
    path: str,
    debian_jar: Path | None,
    debian_slf4j_simple: Path | None,
) -> Installation:
    if zookeeper_home is not None:
        zookeeper_jar, jars, source = _from_home(Path(zookeeper_home), debian_jar)
    elif debian_jar is not None and debian_jar.is_file():
        zookeeper_jar, jars, source = debian_jar, [debian_jar], "debian"
        if DEBIAN_SERVLET_API_JAR.is_file():
            jars.append(DEBIAN_SERVLET_API_JAR)
    else:
        where = f"{debian_jar}: not found" if debian_jar is not None else "(Debian lookup disabled)"
        raise ZooKeeperNotFoundError(
            "ZooKeeper was not found: ZOOKEEPER_HOME is not set and Debian's jar "
            f"{where}.\n{_INSTALL_ZOOKEEPER}"
        )
    names = [jar.name for jar in jars]
    uses_logback = any(name.startswith("logback-classic") for name in names)
    has_binding = uses_logback or any(
        name.startswith(("slf4j-simple", "slf4j-log4j12", "slf4j-reload4j")) for name in names
    )
    if not has_binding and debian_slf4j_simple is not None and debian_slf4j_simple.is_file():
        jars.append(debian_slf4j_simple)
    return Installation(
        java=_find_java(java_home, path),
        zookeeper_jar=zookeeper_jar,
        classpath=tuple(jars),
        source=source,
        uses_logback=uses_logback,
    )


def _from_home(home: Path, debian_jar: Path | None) -> tuple[Path, list[Path], str]:
    lib = home / "lib" if (home / "lib").is_dir() else home
    jars = sorted(lib.glob("*.jar")) if lib.is_dir() else []
    servers = [
        j for j in jars if _ZOOKEEPER_JAR.match(j.name) and not _NOT_SERVER_JAR.search(j.name)
    ]
    if not servers:
        hint = f"\n(Debian's {debian_jar} exists: unset ZOOKEEPER_HOME to use it.)"
        raise ZooKeeperNotFoundError(
            f"ZOOKEEPER_HOME={home} holds no ZooKeeper server jar (looked for "
            f"zookeeper-3.*.jar in {lib}).\n{_INSTALL_ZOOKEEPER}"
            + (hint if debian_jar is not None and debian_jar.is_file() else "")
        )
    return servers[-1], jars, "ZOOKEEPER_HOME"


def _find_java(java_home: str | None, path: str) -> Path:
    if java_home is not None:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("java", path=path)
    if found is not None:
        return Path(found)
    looked = f"$JAVA_HOME/bin/java ({java_home}/bin/java) is missing and " if java_home else ""
    raise JavaNotFoundError(
        f"Java was not found: {looked}no `java` is on PATH. ZooKeeper needs it to run.\n"
        f"{_INSTALL_JAVA}"
    )


def clear_installation_cache() -> None:
    """Forget cached lookups (after installing ZooKeeper or Java in the same process)."""
    _lookup.cache_clear()


__all__ = [
    "DEBIAN_SLF4J_SIMPLE_JAR",
    "DEBIAN_ZOOKEEPER_JAR",
    "HarnessError",
    "Installation",
    "JavaNotFoundError",
    "ZooKeeperNotFoundError",
    "clear_installation_cache",
    "find_installation",
]
