"""The showcase's part for caches, service discovery and queues, each through a fault.

- **Queues**: two consumer processes (``showcase_queue_worker.py``) take jobs
  with a lock path; the one in the middle of a job is killed with -9. Its claim
  goes with its session, the other consumer runs the job, and every job is
  committed once (the commit is a node written in the job's own transaction).
- **Service discovery**: the Flask shop runs under ``zk-recipes announce``;
  Apache Curator's ``ServiceDiscovery``, in a JVM (the interop tests' peer,
  ``tests/interop/CuratorPeer.java``, on Debian's Curator jars), finds it.
- **Caches**: a ``TreeCache`` whose client knows one server only; that server
  is killed with -9, the tree changed meanwhile, the server started again. At
  RESYNCED the cache must equal the server's tree, node for node.

Each step ends with one claim and its evidence, held or not: a step that
cannot happen (no Java, a server that does not come back) is a claim that did
not hold, with the reason, and the rest of the showcase goes on. The Java peer
is compiled and started in the background while the ensemble and the workers
start, so that it costs the run almost nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from showcase_queue_worker import CLAIMS, DONE, NAMESPACE, QUEUE, SESSION_TIMEOUT

from tests.interop.curator import (
    JVM_OPTIONS,
    CuratorBuild,
    CuratorPeer,
    CuratorPeerError,
    curator_classpath,
    peer_sources,
)
from zk_recipes import (
    JSON,
    CacheEvent,
    CacheEventType,
    DistributedQueue,
    NoNodeError,
    TreeCache,
    ZkClient,
    ZkRecipesError,
)
from zk_recipes.testing import ZooKeeperCluster

HERE = Path(__file__).resolve().parent
#: The Flask shop's instance, as ``zk-recipes announce`` registers it (namespace ``/shop``).
SERVICE, INSTANCE_ID, SERVICES_PATH = "shop", "shop-1", "/shop/services"
#: Jobs put; the one marked ``hang`` hangs its first consumer, which is killed there.
JOBS, HANGING = 6, 3
#: The claims, as the report prints them.
QUEUE_CLAIM = "a queue job whose consumer was killed -9 mid-job ran again, each job committed once"
JAVA_CLAIM = "Java's Curator ServiceDiscovery found the Flask shop's announcement"
CACHE_CLAIM = "a TreeCache stayed exact through a kill -9 and restart of its server"


class Failed(Exception):
    """A step that could not happen (not a claim that did not hold: those are reported)."""


def wait_for(condition: Callable[[], object], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Failed(f"no {what} within {timeout:g} s")
        time.sleep(0.05)


class Demo(Protocol):
    """What the showcase's ``Demo`` gives this part."""

    work: Path
    hosts: str
    env: dict[str, str]

    def claim(self, held: bool, claim: str, evidence: str) -> None: ...

    def popen(self, argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]: ...


class Families:
    """The three steps, the consumer processes and the Java peer they need."""

    def __init__(self, demo: Demo, say: Callable[[str], None]) -> None:
        self.demo = demo
        self.say = say
        self.log = demo.work / "jobs.jsonl"
        self._peer: CuratorPeer | None = None
        self._peer_problem = "the Java peer did not start"
        self._peer_ready = threading.Thread(target=self._start_peer, daemon=True)
        self._pids: list[int] = []

    # -- before the steps ---------------------------------------------------------
    def start(self) -> None:
        """Compile and start the Java peer in the background; start the two consumers."""
        self._peer_ready.start()
        worker = str(HERE / "showcase_queue_worker.py")
        for _ in range(2):
            self.demo.popen(
                [sys.executable, worker, self.demo.hosts, str(self.log)], HERE, self.demo.env
            )

    def announce_argv(self, port: int) -> list[str]:
        """The prefix that runs a command as an instance of the shop, Java-readable."""
        return [
            sys.executable, "-m", "zk_recipes", "announce", SERVICE,
            "--id", INSTANCE_ID, "--address", "127.0.0.1", "--port", str(port),
            "--uri-spec", "{scheme}://{address}:{port}", "--",
        ]  # fmt: skip

    def _start_peer(self) -> None:
        try:
            build = _compile_peer(self.demo.work / "curator-peer")
            self._peer = CuratorPeer(
                build, self.demo.hosts, 10_000, log_path=self.demo.work / "curator-peer.log"
            )
            self._pids.append(self._peer.pid)
        except Exception as exc:  # no Java, no jars, javac failed: said in the claim
            self._peer_problem = f"{type(exc).__name__}: {exc}"

    def pids(self) -> list[int]:
        """The JVM (the consumers are the demo's own processes)."""
        return list(self._pids)

    def close(self) -> None:
        self._peer_ready.join(60)
        if self._peer is not None:
            self._peer.close()

    # -- the steps ----------------------------------------------------------------
    def steps(self, cluster: ZooKeeperCluster, port: int) -> None:
        """The three steps, in this order (the server restart last: it disturbs the others)."""
        steps: list[tuple[Callable[[], None], str]] = [
            (self.queue_redo, QUEUE_CLAIM),
            (lambda: self.java_finds_the_shop(port), JAVA_CLAIM),
            (lambda: self.cache_through_restart(cluster), CACHE_CLAIM),
        ]
        for step, claim in steps:
            try:
                step()
            except (Failed, ZkRecipesError, CuratorPeerError, OSError) as exc:
                self.demo.claim(False, claim, f"could not happen: {exc}")

    def queue_redo(self) -> None:
        self.say(f"{JOBS} jobs for two queue consumers (claims in {CLAIMS}); job {HANGING} hangs")
        wait_for(lambda: len(self._entries("ready")) == 2, "two ready consumers", 30)
        with ZkClient(self.demo.hosts, namespace=NAMESPACE).start() as admin:
            admin.ensure_path(DONE)
            with DistributedQueue(admin, QUEUE, serializer=JSON) as jobs:  # put only
                for n in range(1, JOBS + 1):
                    jobs.put({"n": n, "hang": n == HANGING})
            wait_for(lambda: self._starts(HANGING), f"a consumer in job {HANGING}", 30)
            [first] = self._starts(HANGING)
            self.say(
                f"  consumer pid {first['pid']} is in job {HANGING} "
                f"(fencing token {first['token']}): kill -9 it"
            )
            os.kill(first["pid"], signal.SIGKILL)
            killed = time.time()
            wait_for(lambda: len(self._commits(admin)) == JOBS, "a commit of every job", 20)
            commits = self._commits(admin)
            claims_left = admin.get_children(CLAIMS)
        redo = [s for s in self._starts(HANGING) if s["pid"] != first["pid"]]
        per_job = {n: sum(job == n for job, _pid in commits) for n in range(1, JOBS + 1)}
        held = (
            len(redo) == 1
            and set(per_job.values()) == {1}
            and (HANGING, redo[0]["pid"]) in commits
            and not claims_left
        )
        self.demo.claim(
            held,
            QUEUE_CLAIM,
            f"job {HANGING}: pid {first['pid']} killed holding its claim (token "
            f"{first['token']}); pid {redo[0]['pid']} started it {redo[0]['t'] - killed:.1f} s "
            f"after the kill (session timeout {SESSION_TIMEOUT:g} s, token {redo[0]['token']}) "
            f"and committed it; {len(commits)} commits of {JOBS} jobs, none twice, no claim left"
            if held
            else f"starts of job {HANGING}: {self._starts(HANGING)}; commits per job: "
            f"{per_job}; claims left: {claims_left}",
        )

    def _entries(self, event: str) -> list[dict[str, int]]:
        text = self.log.read_text() if self.log.exists() else ""
        lines = text.split("\n")[:-1]  # after the last newline: not a whole line yet
        return [entry for entry in map(json.loads, lines) if entry["event"] == event]

    def _starts(self, job: int) -> list[dict[str, int]]:
        return [entry for entry in self._entries("started") if entry["job"] == job]

    @staticmethod
    def _commits(admin: ZkClient) -> list[tuple[int, int]]:
        """(job, pid) of each commit node (``job-<n>-<pid>``)."""
        names = [name.split("-") for name in admin.get_children(DONE)]
        return sorted((int(job), int(pid)) for _, job, pid in names)

    def java_finds_the_shop(self, port: int) -> None:
        self.say(f"Java's Curator ServiceDiscovery looks for the service {SERVICE!r}")
        self._peer_ready.join(60)
        if self._peer is None:
            raise Failed(self._peer_problem)
        peer = self._peer
        peer.call(f"discovery d {SERVICES_PATH}")

        def found() -> list[dict[str, object]]:
            blobs = peer.call(f"query d {SERVICE}").split()
            return [json.loads(bytes.fromhex(blob)) for blob in blobs]

        wait_for(found, "instance Java can see", 10)
        instances = found()
        peer.call("close d")
        seen = [(i["id"], i["address"], i["port"]) for i in instances]
        self.demo.claim(
            seen == [(INSTANCE_ID, "127.0.0.1", port)],
            JAVA_CLAIM,
            f"queryForInstances({SERVICE!r}) under {SERVICES_PATH}, in a JVM on Curator "
            f"5.4: {len(seen)} instance, id {INSTANCE_ID!r} at 127.0.0.1:{port}, where "
            "`zk-recipes announce` runs `flask run` (the health endpoint's port)"
            if seen == [(INSTANCE_ID, "127.0.0.1", port)]
            else f"Java saw {seen}, expected [({INSTANCE_ID!r}, '127.0.0.1', {port})]",
        )
        peer.close()  # its JVM is not needed any more

    def cache_through_restart(self, cluster: ZooKeeperCluster) -> None:
        member = cluster.followers()[0]
        name = f"server.{member.myid}"
        with (
            ZkClient(cluster.connect_string, namespace=NAMESPACE).start() as admin,
            # It knows this one server only: it is back when the server is.
            ZkClient(member.connect_string, namespace=NAMESPACE, session_timeout=20.0).start()
            as watcher,
            TreeCache(watcher, "/config") as cache,
        ):  # fmt: skip
            for service in ("billing", "search", "checkout"):
                for flag in ("enabled", "limit", "owner"):
                    admin.create(f"/config/{service}/{flag}", b"1", parents=True)
            cache.wait_initialized(10)
            wait_for(lambda: cache.size() == 13, "a loaded cache", 10)
            at_resync: list[dict[str, tuple[bytes, int, int]]] = []

            def on_event(event: CacheEvent) -> None:
                if event.type is CacheEventType.RESYNCED and not at_resync:
                    at_resync.append(_cached(cache))

            cache.listen(on_event)
            self.say(f"kill -9 {name}, the one server a TreeCache's client knows")
            member.kill()
            down = time.monotonic()
            try:
                admin.set("/config/billing/limit", b"250")
                admin.delete("/config/search/owner")
                admin.delete("/config/checkout/enabled")
                admin.create("/config/checkout/enabled", b"0")  # deleted and made again
                admin.create("/config/payments/enabled", b"1", parents=True)
                admin.set("/config/search/enabled", b"0")
                self.say(f"  6 changes to the tree meanwhile; start {name} again")
            finally:
                member.start()
            took = time.monotonic() - down
            wait_for(lambda: at_resync, "RESYNCED", 30)
            server = _server_tree(admin, "/config")
        differ = sorted(set(server.items()) ^ set(at_resync[0].items()))
        self.demo.claim(
            not differ,
            CACHE_CLAIM,
            f"{name} was down {took:.1f} s while the tree changed 6 times; at RESYNCED "
            f"the cache held the server's {len(server)} nodes exactly (data, czxid, mzxid)"
            if not differ
            else f"at RESYNCED the cache and the server differed on {differ}",
        )


def _compile_peer(directory: Path) -> CuratorBuild:
    """The interop tests' Java peer, compiled as they do but by a javac on C1 (half the CPU)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        raise Failed("no java and javac: apt-get install -y default-jdk-headless")
    classpath = os.pathsep.join(str(jar) for jar in curator_classpath())
    sources = [str(source) for source in peer_sources()]
    javac_options = [f"-J{option}" for option in JVM_OPTIONS if option.startswith("-X")]
    directory.mkdir(parents=True, exist_ok=True)
    compiled = subprocess.run(
        [javac, *javac_options, "-nowarn", "-cp", classpath, "-d", str(directory), *sources],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if compiled.returncode != 0:
        raise Failed(f"javac failed: {compiled.stderr.strip()[-500:]}")
    return CuratorBuild(
        java=Path(java), classpath=os.pathsep.join([classpath, str(directory)]), directory=directory
    )


def _cached(cache: TreeCache) -> dict[str, tuple[bytes, int, int]]:
    return {
        path: (node.data or b"", node.stat.czxid, node.stat.mzxid)
        for path, node in cache.current().items()
    }


def _server_tree(client: ZkClient, root: str) -> dict[str, tuple[bytes, int, int]]:
    """Every node under ``root`` as the server has it: path -> (data, czxid, mzxid)."""
    found: dict[str, tuple[bytes, int, int]] = {}

    def visit(path: str) -> None:
        with contextlib.suppress(NoNodeError):
            data, stat = client.get(path)
            found[path] = (data, stat.czxid, stat.mzxid)
            for name in client.get_children(path):
                visit(f"{path}/{name}")

    visit(root)
    return found
