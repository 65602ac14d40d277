"""The `zk-recipes` command as ops use it: run `python example_projects/cli/cli_demo.py`.

Starts a throwaway ZooKeeper, then, as three hosts would:

1. a cron job on every host, guarded by `lock --no-wait`: exactly one runs it,
   the others exit 75 ("busy") at once;
2. a deploy that runs `lock db-migrate -- migrate` on every pod: they take
   turns, the later ones find nothing left to do;
3. two `leader` standbys; `holders` shows the leader and the standby, then
   the leader is killed (kill -9 of its process group) and the standby takes
   over within the session timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from zk_recipes.testing import ZooKeeperServer


def zk_recipes(*args: str, env: dict[str, str], own_group: bool = False) -> subprocess.Popen[str]:
    """`zk-recipes ARGS` as another host would run it."""
    return subprocess.Popen(
        [sys.executable, "-m", "zk_recipes", *args],
        env=env,
        text=True,
        start_new_session=own_group,
    )


def wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear in {timeout}s")
        time.sleep(0.05)


def wait_for_exits(processes: list[subprocess.Popen[str]], count: int) -> None:
    timeout = 30.0
    deadline = time.monotonic() + timeout
    while sum(process.poll() is not None for process in processes) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{count} of the hosts did not finish in {timeout}s")
        time.sleep(0.05)


def the_election(env: dict[str, str]) -> dict[str, Any]:
    """The beat's election as `zk-recipes holders --json` shows it: leader and standbys."""
    table = subprocess.run(
        [sys.executable, "-m", "zk_recipes", "holders", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    (election,) = [r for r in json.loads(table.stdout) if r["kind"] == "leader latch"]
    return dict(election)


def main() -> None:
    with ZooKeeperServer() as server, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = dict(
            os.environ,
            ZK_RECIPES_HOSTS=server.connect_string,
            ZK_RECIPES_NAMESPACE="cli-demo",
            ZK_RECIPES_SESSION_TIMEOUT="3",
        )

        print("1. a cron job on three hosts, guarded by lock --no-wait")
        # The report runs until the demo has seen the other hosts refused (a minute at most):
        # a report of fixed length could end, on a busy machine, before they even try.
        done = work / "report-done"
        job = (
            f"echo $0 >> {work}/report.log; "
            f"for _ in $(seq 1200); do [ -e {done} ] && break; sleep 0.05; done"
        )
        crons = [
            zk_recipes("lock", "--no-wait", "report", "--", "sh", "-c", job, f"host-{n}", env=env)
            for n in (1, 2, 3)
        ]
        try:
            wait_for_exits(crons, 2)
        finally:
            done.touch()
        codes = sorted(cron.wait(30) for cron in crons)
        ran = (work / "report.log").read_text().split()
        print(f"   exit codes {codes}; the report ran on {ran}")
        if codes != [0, 75, 75] or len(ran) != 1:
            raise SystemExit("expected exactly one run and two busy exits")

        print("2. three pods of a deploy each run the migration under one lock")
        migrate = (
            f'if [ -e {work}/migrated ]; then echo "$0: nothing to migrate"; '
            f'else sleep 1; touch {work}/migrated; echo "$0: migrated"; fi'
        )
        pods = [
            zk_recipes("lock", "db-migrate", "--", "sh", "-c", migrate, f"pod-{n}", env=env)
            for n in (1, 2, 3)
        ]
        print(f"   exit codes {[pod.wait(60) for pod in pods]}")

        print("3. two standbys for the beat: the leader runs it, kill -9 hands it over")
        beat = f"echo $0 > {work}/beat-$0; while true; do sleep 0.1; done"
        standbys: dict[str, subprocess.Popen[str]] = {}
        try:
            for name in ("beat-a", "beat-b"):  # beat-a first: it leads, beat-b stands by
                standbys[name] = zk_recipes(
                    "leader", "beat", "--", "sh", "-c", beat, name, env=env, own_group=True
                )
                if name == "beat-a":
                    wait_for(work / "beat-beat-a")
            election = the_election(env)
            deadline = time.monotonic() + 30
            while not election["waiting"]:  # until beat-b is in line behind the leader
                if time.monotonic() > deadline:
                    raise SystemExit("beat-b did not stand by within 30s")
                time.sleep(0.1)
                election = the_election(env)
            print(
                f"   {election['path']}: leader pid {election['holders'][0]['pid']}, "
                f"{len(election['waiting'])} standby"
            )
            killed_at = time.monotonic()
            os.killpg(standbys["beat-a"].pid, signal.SIGKILL)
            wait_for(work / "beat-beat-b")
            took = time.monotonic() - killed_at
            print(f"   beat-b took over {took:.1f}s after the kill (session 3s)")
            standbys["beat-b"].send_signal(signal.SIGTERM)
            print(f"   beat-b stopped with exit code {standbys['beat-b'].wait(10)}")
        finally:
            for process in standbys.values():  # nothing left running if a step failed
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        print("demo finished", flush=True)


if __name__ == "__main__":
    main()
