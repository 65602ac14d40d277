"""The whole suite through faults, in under a minute: `bash scripts/demo.sh` (its main job).

On a throwaway 3-node ZooKeeper ensemble and a Redis, all on loopback:

- the Django shop of ``example_projects/django_site`` with its Celery app
  (``shop_site/celery.py``, configured from Django's settings): two workers
  and two beats; ``sync_customer`` is a singleton task, the beat's
  ``nightly_report`` a ``@leader_only`` task, sent every second here;
- the Flask shop of ``example_projects/flask_app`` under ``flask run``, whose
  ``/zk/health`` is asked every 0.1 s from start to end, announced for service
  discovery by ``zk-recipes announce``;
- three "pods" of that shop run ``manage.py zklock migrate -- migrate`` at once;
- the ``zk-recipes`` command: ``lock --no-wait`` twice at once;
- caches, discovery and queues (``showcase_families.py``): a queue's two
  consumer processes, Apache Curator in a JVM looking for the Flask shop, a
  ``TreeCache`` whose one server restarts.

Part-way it kills with -9 the worker running a singleton task, the leader
beat, the queue consumer in the middle of a job, the TreeCache's server (then
starts it again) and the ensemble's leader server. Then it prints one line per
claim with its evidence, and exits 0 when every claim held, 1 naming those
that did not.
Every process it started is stopped and its temporary directory removed,
whatever happens.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery
from showcase_families import Failed, Families, wait_for

from zk_recipes import NoNodeError, ZkClient, holders
from zk_recipes.testing import ZooKeeperCluster, free_ports
from zk_recipes_celery.testing import CeleryProcess, RedisServer

ROOT = Path(__file__).resolve().parents[2]
FLASK_APP = ROOT / "example_projects" / "flask_app"
DJANGO_SITE = ROOT / "example_projects" / "django_site"
SESSION_TIMEOUT = 4.0  # the shop's ZK_RECIPES["default"]["SESSION_TIMEOUT"]
NAMESPACE = "/shop"  # ... and its NAMESPACE: the Celery app's nodes are under it too
ELECTION = "/celery/beat/shop_site"
SINGLETON = "/celery/singleton/invoices.tasks.sync_customer"
SYNC = "invoices.tasks.sync_customer"

T0 = time.monotonic()


def elapsed() -> str:
    return f"{time.monotonic() - T0:5.1f}s"


def say(message: str) -> None:
    Progress.clear()
    print(f"[{elapsed()}] {message}", flush=True)


def read_log(path: Path, task: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]  # after the last newline: not a whole line yet
    return [entry for entry in map(json.loads, lines) if entry["task"] == task]


class Progress:
    """One live line while the demo waits (a terminal only; a log gets the ``say`` lines)."""

    live = sys.stdout.isatty()
    shown = False

    def __init__(self, describe: Callable[[], str]) -> None:
        self._describe = describe
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Progress:
        if self.live:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.live:
            self._thread.join(2)
        Progress.clear()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            print(f"\r\033[K[{elapsed()}] {self._describe()}", end="", flush=True)
            Progress.shown = True

    @classmethod
    def clear(cls) -> None:
        if cls.shown:
            print("\r\033[K", end="", flush=True)
            cls.shown = False


class Health:
    """Asks the Flask app's ``/zk/health`` every 0.1 s: every answer, and how long it took."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[float, int, float]] = []  # (when, status or 0, seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started: a failure before it must not be hidden
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            began = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as answer:
                    status = answer.status
            except urllib.error.HTTPError as refused:
                status = refused.code
            except OSError:  # a timeout or a refused connection: no answer
                status = 0
            self.answers.append((time.time(), status, time.monotonic() - began))


class Demo:
    """The processes and the evidence; ``claims`` is what the report prints."""

    def __init__(self, work: Path, hosts: str, redis_url: str) -> None:
        self.work = work
        self.hosts = hosts
        self.redis_url = redis_url
        self.log = work / "demo.jsonl"
        self.processes: list[CeleryProcess] = []
        self.others: list[subprocess.Popen[str]] = []
        self.claims: list[tuple[bool, str, str]] = []  # (held, claim, evidence)
        #: What ``others`` had started (the Flask app under ``zk-recipes announce``), at the end.
        self.descendants: list[int] = []
        base = dict(os.environ, ZK_HOSTS=hosts, REDIS_URL=redis_url, PYTHONUNBUFFERED="1")
        base.pop("ZK_RECIPES_NAMESPACE", None)
        self.env = dict(base, DEMO_LOG=str(self.log))
        paths = [str(ROOT), str(ROOT / "integrations"), base.get("PYTHONPATH", "")]
        self.pythonpath = os.pathsep.join(filter(None, paths))
        #: The Django shop's processes: its settings, its sqlite file, its report every second.
        self.django_env = dict(
            self.env,
            SHOP_DB=str(work / "shop.sqlite3"),
            SHOP_REPORT_EVERY="1",
            DJANGO_SETTINGS_MODULE="shop_site.settings",
            PYTHONPATH=os.pathsep.join([str(DJANGO_SITE), self.pythonpath]),
        )

    def claim(self, held: bool, claim: str, evidence: str) -> None:
        self.claims.append((held, claim, evidence))

    # -- processes -----------------------------------------------------------
    def celery(self, name: str, *args: str) -> CeleryProcess:
        argv = [sys.executable, "-m", "celery", "-A", "shop_site", *args, "-l", "INFO"]
        log = self.work / f"{name}.log"
        process = CeleryProcess(args[0], name, argv, log, cwd=DJANGO_SITE, env=self.django_env)
        self.processes.append(process)
        return process

    def popen(self, argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.others.append(process)
        return process

    def stop_all(self) -> None:
        self.descendants = [child for other in self.others for child in _descendants(other.pid)]
        for process in reversed(self.processes):
            with contextlib.suppress(Exception):
                process.stop()
        for other in self.others:
            if other.poll() is None:
                other.terminate()
            with contextlib.suppress(Exception):
                other.communicate(timeout=15)


def _descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (Linux's /proc)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in children] + [d for c in children for d in _descendants(int(c))]


def election(zk: ZkClient) -> list[tuple[str, int]]:
    """The beats in the election, leader first: (node, pid); a node's data is "host:pid"."""
    try:
        nodes = sorted(zk.get_children(ELECTION), key=lambda node: node.rsplit("-", 1)[1])
    except NoNodeError:
        return []
    members = []
    for node in nodes:
        with contextlib.suppress(NoNodeError):
            data, _ = zk.get(f"{ELECTION}/{node}")
            members.append((node, int(data.decode().rsplit(":", 1)[1])))
    return members


def singleton_holder(zk: ZkClient) -> tuple[str, int] | None:
    """The lock node of the running ``sync_customer`` and its owner's pid, if one runs."""
    for recipe in holders(zk, SINGLETON):
        for node in recipe.holders:
            if node.owner.pid is not None:
                return node.node, node.owner.pid
    return None


def group_of(pid: int, processes: list[CeleryProcess]) -> CeleryProcess | None:
    """The worker whose process group holds ``pid`` (a prefork child, or the worker itself)."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return None
    return next((p for p in processes if p.pid is not None and os.getpgid(p.pid) == group), None)


# -- the steps ----------------------------------------------------------------------
def deploy(demo: Demo) -> None:
    say("three Django pods run `manage.py zklock migrate -- migrate` at once")
    argv = [sys.executable, str(DJANGO_SITE / "manage.py"), "zklock", "migrate", "--"]
    env = demo.django_env
    pods = [demo.popen([*argv, "migrate", "--noinput"], DJANGO_SITE, env) for _ in range(3)]
    migrated = 0
    for pod in pods:
        out, err = pod.communicate(timeout=120)
        if pod.returncode != 0:
            raise Failed(f"a pod exited {pod.returncode}: {err.strip()[-300:]}")
        migrated += "Applying invoices.0001_initial" in out
    demo.claim(
        migrated == 1,
        "three pods migrating at once migrated exactly once",
        f"{migrated} pod applied the migrations, the others waited and found nothing left",
    )


def cli_no_wait(demo: Demo) -> None:
    say("`zk-recipes lock --no-wait report -- sleep 2`, twice at once")
    env = dict(demo.env, ZK_RECIPES_HOSTS=demo.hosts)
    argv = [sys.executable, "-m", "zk_recipes", "lock", "--no-wait", "report", "--"]
    runs = [demo.popen([*argv, "sleep", "2"], demo.work, env) for _ in range(2)]
    codes = sorted(run.wait(60) for run in runs)
    demo.claim(
        codes == [0, 75],
        "`zk-recipes lock --no-wait` refused a second run",
        f"exit codes {codes}: one ran, the other exited 75 (busy) at once",
    )


def singletons(demo: Demo, client: Celery, zk: ZkClient) -> None:
    for burst in ("", ", again"):
        say(f"12 x sync_customer('acme') at once on two workers{burst}: one runs, the rest skip")
        results = [client.send_task(SYNC, args=["acme", 0.3]) for _ in range(12)]
        outcomes = [result.get(timeout=60) for result in results]
        ran = sum(outcome is not None for outcome in outcomes)
        say(f"  {ran} ran, {len(outcomes) - ran} skipped")

    say("a long sync_customer('initech'); kill -9 the worker that runs it, mid-task")
    client.send_task(SYNC, args=["initech", 60.0])
    wait_for(lambda: singleton_holder(zk) is not None, "holder of sync_customer('initech')", 30)
    holding = singleton_holder(zk)
    assert holding is not None
    node, pid = holding
    worker = group_of(pid, demo.processes)
    if worker is None:
        raise Failed(f"no worker holds pid {pid}")
    show_holders(demo)
    freed = threading.Event()
    zk.exists(node, watch=lambda _event: freed.set())
    say(f"  {worker.name} (pid {pid}) holds {node.rsplit('/', 1)[-1]}: kill -9 its group")
    worker.kill_group()
    killed = time.monotonic()
    in_time = freed.wait(3 * SESSION_TIMEOUT)
    took = time.monotonic() - killed
    demo.claim(
        in_time and took <= 2 * SESSION_TIMEOUT,
        "a worker's kill -9 freed its singleton lock within the session timeout",
        f"the lock node went {took:.1f} s after the kill (session timeout {SESSION_TIMEOUT:g} s)"
        if in_time
        else f"the lock node was still there {took:.1f} s after the kill",
    )


def show_holders(demo: Demo) -> None:
    """``zk-recipes holders /celery``, as an operator would run it, at this moment."""
    say("`zk-recipes holders /celery` at this moment:")
    table = subprocess.run(
        [sys.executable, "-m", "zk_recipes", "holders", "/celery"],
        env=dict(demo.env, ZK_RECIPES_HOSTS=demo.hosts, ZK_RECIPES_NAMESPACE=NAMESPACE),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    print(table.stdout.rstrip() or table.stderr.rstrip(), flush=True)


def beats(demo: Demo, zk: ZkClient, beat_processes: list[CeleryProcess]) -> None:
    wait_for(lambda: len(election(zk)) == 2, "two beats in the election", 30)
    leader_node, leader_pid = election(zk)[0]
    leader = next(b for b in beat_processes if b.pid == leader_pid)
    standby = next(b for b in beat_processes if b is not leader)
    wait_for(lambda: len(read_log(demo.log, "nightly_report")) >= 3, "three ticks", 20)
    gone = threading.Event()
    gone_at: list[float] = []

    def on_gone(_event: object) -> None:
        gone_at.append(time.time())
        gone.set()

    zk.exists(f"{ELECTION}/{leader_node}", watch=on_gone)
    say(f"kill -9 the leader beat, {leader.name} (pid {leader.pid})")
    leader.kill_group()
    killed = time.time()
    if not gone.wait(3 * SESSION_TIMEOUT):
        raise Failed("the dead leader beat's node never went")
    wait_for(
        lambda: any(r["t"] >= gone_at[0] for r in read_log(demo.log, "nightly_report")),
        "a tick from the new leader",
        3 * SESSION_TIMEOUT,
    )
    first = min(r["t"] for r in read_log(demo.log, "nightly_report") if r["t"] >= gone_at[0])
    new_leader = election(zk)[0][1] if election(zk) else None
    demo.claim(
        new_leader == standby.pid,
        "the standby beat took over after the leader's kill -9",
        f"its first tick came {first - killed:.1f} s after the kill (the dead session "
        f"expired after {gone_at[0] - killed:.1f} s, timeout {SESSION_TIMEOUT:g} s)",
    )


def ensemble_leader(demo: Demo, cluster: ZooKeeperCluster, client: Celery) -> None:
    leader = cluster.leader()
    say(f"kill -9 the ensemble's leader server ({leader!r}); two of three keep the quorum")
    leader.kill()
    cluster.wait_for_quorum(30)
    say("sync_customer('globex') after the new election: it runs")
    result = client.send_task(SYNC, args=["globex", 0.1]).get(timeout=60)
    demo.claim(
        isinstance(result, dict) and result.get("customer") == "globex",
        "the ensemble lost its leader and the suite kept working",
        f"a new leader was elected ({cluster.leader()!r}); "
        f"sync_customer('globex') then ran, fencing token {result['fencing_token']}"
        if isinstance(result, dict)
        else f"sync_customer('globex') returned {result!r}",
    )


def report_runs(demo: Demo) -> None:
    runs = read_log(demo.log, "sync_customer")
    overlaps = []
    for customer in {r["customer"] for r in runs}:
        ran = sorted((r for r in runs if r["customer"] == customer), key=lambda r: r["start"])
        for before, after in itertools.pairwise(ran):
            if after["start"] < before["end"] or after["token"] <= before["token"]:
                overlaps.append((customer, before["token"], after["token"]))
    acme = sorted((r for r in runs if r["customer"] == "acme"), key=lambda r: r["start"])
    tokens = [r["token"] for r in acme]
    demo.claim(
        not overlaps and len(tokens) >= 2,
        "singleton runs of one customer never overlapped",
        f"{len(runs)} runs; acme's fencing tokens in run order: {tokens}"
        if not overlaps
        else f"overlaps or tokens out of order: {overlaps}",
    )
    ticks = sorted(r["t"] for r in read_log(demo.log, "nightly_report"))
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    # Two beats sending would make about two ticks a second. The ticks are stamped when a
    # worker runs them, so a busy worker can run two queued ticks close together: the
    # count over the span is the evidence, the closest gap only a hint.
    demo.claim(
        len(ticks) >= 3 and len(ticks) <= 1.25 * span + 2,
        "each @leader_only tick fired once, from one beat of two",
        f"{len(ticks)} ticks in {span:.1f} s (period 1 s; two senders would make about "
        f"{2 * span:.0f}); the closest two ran {min(gaps):.2f} s apart"
        if gaps
        else "fewer than two ticks",
    )


def report_health(demo: Demo, health: Health) -> None:
    statuses: dict[int, int] = {}
    for _when, status, _took in health.answers:
        statuses[status] = statuses.get(status, 0) + 1
    slowest = max((took for _w, _s, took in health.answers), default=0.0)
    seen = ", ".join(
        f"{count} x {status or 'no answer'}" for status, count in sorted(statuses.items())
    )
    demo.claim(
        # A hang on ZooKeeper would last the 4 s session timeout or more; 3 s leaves room
        # for a loaded machine (the demo runs beside a test suite in CI).
        bool(health.answers) and 0 not in statuses and slowest < 3.0,
        "the Flask health endpoint answered at once throughout, leader deaths included",
        f"{len(health.answers)} answers ({seen}), the slowest in {slowest:.2f} s",
    )


def main() -> int:
    say("starting a throwaway 3-node ZooKeeper ensemble and a Redis ...")
    with tempfile.TemporaryDirectory(prefix="zk-recipes-showcase-") as tmp:
        work = Path(tmp)
        with ZooKeeperCluster(3) as cluster, RedisServer(work / "redis") as redis_server:
            demo = Demo(work, cluster.connect_string, f"{redis_server.url}/0")
            families = Families(demo, say)
            run(demo, cluster, families)
            pids = [p.pid for p in demo.processes] + [p.pid for p in demo.others]
            pids += families.pids() + demo.descendants
    alive = [pid for pid in pids if pid is not None and _alive(pid)]
    demo.claim(
        not alive and not work.exists(),
        "nothing was left behind",
        f"{len(pids)} processes started, all gone; the temporary directory removed"
        if not alive
        else f"still running: {alive}",
    )
    return report(demo)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(OSError):
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    return True


def run(demo: Demo, cluster: ZooKeeperCluster, families: Families) -> None:
    health: Health | None = None
    client = Celery("showcase", broker=demo.redis_url, backend=demo.redis_url)
    try:
        with ZkClient(demo.hosts, namespace=NAMESPACE, session_timeout=10.0).start() as zk:
            say("two Celery workers, two beats, the Flask app under `flask run`")
            workers = [
                demo.celery(f"worker-{n}", "worker", "-c", "2", "-n", f"w{n}@%h",
                            "--without-gossip", "--without-mingle", "--without-heartbeat")
                for n in (1, 2)
            ]  # fmt: skip
            beat_processes = [
                demo.celery(
                    f"beat-{n}", "beat", "-s", str(demo.work / f"beat-{n}"), "--max-interval", "1"
                )
                for n in (1, 2)
            ]
            (port,) = free_ports(1)
            flask_env = dict(
                demo.env,
                PYTHONPATH=os.pathsep.join([str(FLASK_APP), demo.pythonpath]),
                ZK_RECIPES_HOSTS=demo.hosts,  # for `zk-recipes announce`
                ZK_RECIPES_NAMESPACE=NAMESPACE,
            )
            demo.popen(
                [
                    *families.announce_argv(port),  # an instance of "shop" while it runs
                    sys.executable,
                    "-m",
                    "flask",
                    "--app",
                    "shop",
                    "run",
                    "--port",
                    str(port),
                    "--no-reload",
                ],
                FLASK_APP,
                flask_env,
            )
            health = Health(f"http://127.0.0.1:{port}/zk/health")
            for worker in workers:
                worker.wait_log(" ready.", 60)
            wait_for(lambda: _up(health.url), "the Flask app", 30)
            health.start()

            def describe() -> str:
                ticks = len(read_log(demo.log, "nightly_report"))
                runs = len(read_log(demo.log, "sync_customer"))
                answers = len(health.answers) if health else 0
                return f"beat ticks {ticks}, singleton runs {runs}, health answers {answers}"

            with Progress(describe):
                deploy(demo)
                cli_no_wait(demo)
                # Two queue consumers, and the Java peer compiled and started in the
                # background: ready by the time their steps come, while the next two mostly
                # wait for sessions to expire.
                families.start()
                singletons(demo, client, zk)
                beats(demo, zk, beat_processes)
                families.steps(cluster, port)
                ensemble_leader(demo, cluster, client)
                time.sleep(1.5)  # a last tick or two after the election, for the report
            report_runs(demo)
    except Failed as exc:
        demo.claim(False, "the demo ran to its end", str(exc))
    finally:
        if health is not None:
            health.stop()
        client.close()
        families.close()
        demo.stop_all()
    if health is not None:
        report_health(demo, health)


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def report(demo: Demo) -> int:
    print("\nWhat held, and the evidence:", flush=True)
    for held, claim, evidence in demo.claims:
        print(f"  {'ok  ' if held else 'FAIL'} {claim}\n       {evidence}")
    failed = [claim for held, claim, _ in demo.claims if not held]
    if failed:
        print(f"\n{len(failed)} claim(s) did not hold: " + "; ".join(failed))
        return 1
    print(f"\nevery claim held ({len(demo.claims)}), in {elapsed().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
