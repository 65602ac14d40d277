"""zk-recipes in a real Celery deployment, driven end to end (``scripts/demo.sh``, part 4).

Run it with ``python example_projects/celery_site/celery_demo.py``. It starts a
throwaway ZooKeeper and redis-server, then real ``celery -A proj`` processes on
the project beside this driver (``proj.py``):

1. two prefork workers (2 processes each) get 10 concurrent ``sync_account(42)``
   and 2 ``sync_account(7)``: runs of one account never overlap, the extra
   copies are skipped, and each run's fencing token is higher than the last;
2. two ``celery beat`` processes run the same schedule: only the elected leader
   sends the ``@leader_only`` task, so it runs once a second, not twice;
3. the leader beat is killed with -9: once ZooKeeper expires its session the
   other beat leads and the task runs again.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery

from zk_recipes import NoNodeError, WatchEvent, ZkClient
from zk_recipes.testing import ZooKeeperServer
from zk_recipes_celery.testing import CeleryProcess, RedisServer

SITE = Path(__file__).resolve().parent  # proj.py is beside this driver
SESSION_TIMEOUT = 4.0  # proj.py's zk_recipes_session_timeout
ELECTION = "/celery/beat/proj"  # <prefix>/beat/<app name>
WINDOW = 5.0

T0 = time.monotonic()
WALL0 = time.time()  # the log's wall-clock times are printed relative to this


def say(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.2f}s] {message}", flush=True)


def check(ok: bool, what: str) -> None:
    """Stop the demo with a clear message if something did not behave."""
    if not ok:
        raise SystemExit(f"celery demo failed: {what}")


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        check(time.monotonic() < deadline, f"no {what} within {timeout:g} s")
        time.sleep(0.05)


def read_log(path: Path, task: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]  # after the last newline: not a whole line yet
    return [entry for entry in map(json.loads, lines) if entry["task"] == task]


def election(zk: ZkClient) -> list[tuple[str, int]]:
    """The beats in the election, leader first: (node, pid); a node's data is "host:pid"."""
    if zk.exists(ELECTION) is None:
        return []
    nodes = sorted(zk.get_children(ELECTION), key=lambda node: node.rsplit("-", 1)[1])
    members = []
    for node in nodes:
        with contextlib.suppress(NoNodeError):  # it may vanish between the two reads
            data, _ = zk.get(f"{ELECTION}/{node}")
            members.append((node, int(data.decode().rsplit(":", 1)[1])))
    return members


def send_burst(client: Celery, sent: dict[int, int]) -> list[tuple[int, Any]]:
    """Send every copy at once, then wait for all results: (account, result) pairs."""
    results = [
        (account, client.send_task("proj.sync_account", args=[account]))
        for account, copies in sent.items()
        for _ in range(copies)
    ]
    try:
        return [(account, result.get(timeout=30)) for account, result in results]
    except Exception as exc:
        raise SystemExit(f"celery demo failed: sync_account results: {exc!r}") from exc


def singleton_demo(client: Celery, demo_log: Path) -> None:
    sent = {42: 10, 7: 2}
    outcomes = []
    for round_ in ("", " again, once those are over"):
        say(f"sending 10 x sync_account(42) and 2 x sync_account(7) at once{round_}")
        outcomes += send_burst(client, sent)
    sent = {account: 2 * copies for account, copies in sent.items()}
    runs = read_log(demo_log, "sync_account")
    for account, copies in sent.items():
        ran = sorted((r for r in runs if r["account"] == account), key=lambda r: r["start"])
        skipped = sum(1 for a, outcome in outcomes if a == account and outcome == "skipped")
        check(len(ran) + skipped == copies, f"account {account}: {len(ran)} ran, {skipped} skipped")
        check(len(ran) >= 2, f"account {account} did not run in each burst: {ran}")
        for before, after in itertools.pairwise(ran):
            check(
                after["start"] >= before["end"],
                f"two runs of account {account} overlapped: {before} and {after}",
            )
            check(after["token"] > before["token"], f"fencing token went back: {ran}")
        say(f"  account {account}: {len(ran)} ran, {skipped} skipped")
        for run in ran:
            say(
                f"    token {run['token']}  pid {run['pid']}  "
                f"ran {run['start'] - WALL0:6.2f}s -> {run['end'] - WALL0:6.2f}s"
            )
    say("  runs of one account never overlapped, and their fencing tokens increase")
    side_by_side = any(
        r["account"] != s["account"] and r["start"] < s["end"] and s["start"] < r["end"]
        for r, s in itertools.combinations(runs, 2)
    )
    if side_by_side:
        say("  (accounts 42 and 7 did run side by side: the lock is per account)")


def beat_demo(zk: ZkClient, beats: list[CeleryProcess], demo_log: Path) -> None:
    wait_for(lambda: len(election(zk)) == 2, "two beats in the election", 30)
    by_pid = {beat.pid: beat for beat in beats}
    leader_node, leader_pid = election(zk)[0]
    leader = by_pid[leader_pid]
    standby = next(beat for beat in beats if beat is not leader)
    say(f"both beats joined {ELECTION}; {leader.name} (pid {leader.pid}) leads")

    start = time.time()
    time.sleep(WINDOW)
    runs = [r for r in read_log(demo_log, "nightly_report") if start <= r["t"] < start + WINDOW]
    dropped = standby.log().count("not sending due task nightly-report")
    say(
        f"in {WINDOW:g} s: nightly_report ran {len(runs)} times (two beats, one sender); "
        f"{standby.name} dropped {dropped} due entries as standby"
    )
    check(WINDOW - 2 <= len(runs) <= WINDOW + 2, f"expected ~{WINDOW:g} runs, got {len(runs)}")
    check(dropped >= 1, f"{standby.name} never skipped an entry as the standby")

    # A watch tells when ZooKeeper removes the dead leader's node: its session expired.
    gone = threading.Event()
    gone_at: list[float] = []

    def on_gone(event: WatchEvent) -> None:
        gone_at.append(time.time())
        gone.set()

    check(zk.exists(f"{ELECTION}/{leader_node}", watch=on_gone) is not None, "leader node gone")
    say(f"3. kill -9 {leader.name}, the leader: its node goes when its session expires")
    leader.kill_group()
    killed = time.time()
    deadline = 3 * SESSION_TIMEOUT
    check(gone.wait(deadline), f"the dead leader's node still there after {deadline:g} s")

    # Runs the dead leader sent just before dying may land after the kill; the new
    # leader can only send once the dead one's node is gone, so count from there.
    def taken_over() -> bool:
        return any(r["t"] >= gone_at[0] for r in read_log(demo_log, "nightly_report"))

    wait_for(taken_over, "nightly_report from a new leader", killed + deadline - time.time())
    first = min(r["t"] for r in read_log(demo_log, "nightly_report") if r["t"] >= gone_at[0])
    wait_for(lambda: bool(election(zk)), "a leader in the election", 5)
    new_pid = election(zk)[0][1]
    check(new_pid == standby.pid, f"the leader is pid {new_pid}, not {standby.name}")
    say(
        f"  its session expired {gone_at[0] - killed:.2f} s after the kill "
        f"(session timeout {SESSION_TIMEOUT:g} s); {standby.name} (pid {standby.pid}) leads now"
    )
    say(f"  failover: the next nightly_report ran {first - killed:.2f} s after the kill")


def main() -> int:
    say("starting a throwaway ZooKeeper and redis-server on loopback ...")
    processes: list[CeleryProcess] = []
    client: Celery | None = None
    with (
        tempfile.TemporaryDirectory(prefix="celery-demo-") as tmp,
        ZooKeeperServer() as zk_server,
        RedisServer(Path(tmp) / "redis") as redis_server,
    ):
        work = Path(tmp)
        demo_log = work / "demo.jsonl"
        try:
            redis_url = f"{redis_server.url}/0"
            say(f"ZooKeeper at {zk_server.connect_string}, Redis at {redis_url}")
            env = dict(os.environ, REDIS_URL=redis_url, ZK_HOSTS=zk_server.connect_string)
            env.update(DEMO_LOG=str(demo_log), PYTHONUNBUFFERED="1")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))

            def celery(name: str, *args: str) -> CeleryProcess:
                argv = [sys.executable, "-m", "celery", "-A", "proj", *args, "-l", "INFO"]
                log = work / f"{name}.log"
                process = CeleryProcess(args[0], name, argv, log, cwd=SITE, env=env)
                processes.append(process)
                return process

            say("1. a singleton task: celery -A proj worker -c 2, twice")
            workers = [
                celery(f"worker-{n}", "worker", "-c", "2", "-n", f"w{n}@%h", "--without-gossip",
                       "--without-mingle", "--without-heartbeat")
                for n in (1, 2)
            ]  # fmt: skip
            for worker in workers:
                worker.wait_log(" ready.", 30)
            client = Celery("demo", broker=redis_url, backend=redis_url)
            singleton_demo(client, demo_log)

            say("2. leader-only beat entries: celery -A proj beat, twice")
            beats = [
                celery(f"beat-{n}", "beat", "-s", str(work / f"beat-{n}"), "--max-interval", "1")
                for n in (1, 2)
            ]
            with ZkClient(zk_server.connect_string) as zk:
                beat_demo(zk, beats, demo_log)
        except BaseException:
            for process in processes:
                print(f"--- {process.name}, last lines:\n{process.log_tail(15)}", file=sys.stderr)
            raise
        finally:
            if client is not None:
                client.close()
            for process in reversed(processes):  # beats, then workers
                process.stop()
    print("celery demo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
