"""The Flask integration end to end: run `python example_projects/flask_app/flask_demo.py`.

Starts a throwaway ZooKeeper, then:

1. cron on three hosts runs `flask zk lock --no-wait export -- flask export-orders`:
   one exports, two exit 75 at once;
2. the app under `flask run`: three clicks on "charge order 7" at once; one
   charges (200), two get 423 Locked at once; a later click charges again
   with a higher fencing token;
3. the status blueprint: `/zk/health` for load balancers, `/zk/` listing a
   held lock; `flask zk holders --json` names its holder.

In steps 1 and 2 the one that gets the lock keeps it until the demo has seen
the others refused: the demo gives those processes ``DEMO_HOLD_UNTIL``, a file
it creates then (``shop/demo_hold.py``), so no step depends on how fast the
machine is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from zk_recipes import Lock
from zk_recipes.testing import ZooKeeperServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def flask(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`flask --app shop ARGS` as another host would run it."""
    return subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "shop", *args],
        env=env,
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: {what} did not happen within {timeout:g}s")
        time.sleep(0.05)


def request(url: str, method: str = "GET") -> tuple[int, str]:
    try:
        sent = urllib.request.Request(url, method=method)
        with urllib.request.urlopen(sent, timeout=90) as answer:
            return answer.status, answer.read().decode().strip()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode().strip()
    except urllib.error.URLError:  # not listening yet
        return 0, ""


def cron(env: dict[str, str], scratch: Path) -> None:
    print("== 1. cron on three hosts: flask zk lock --no-wait export -- flask export-orders")
    exported = scratch / "orders-exported"  # the host that exports holds the lock until this exists
    env = dict(env, DEMO_HOLD_UNTIL=str(exported))
    command = [sys.executable, "-m", "flask", "--app", "shop", "export-orders"]
    hosts = [flask("zk", "lock", "--no-wait", "export", "--", *command, env=env) for _ in range(3)]
    try:
        wait_until(
            lambda: sum(host.poll() is not None for host in hosts) == 2,
            "two hosts done while one exports",
            timeout=60,
        )
    finally:
        exported.touch()  # the export is written: its host may finish
    codes = []
    for host in hosts:
        out, _ = host.communicate(timeout=60)
        codes.append(host.returncode)
        if out.strip():
            print(f"   {out.strip()}")
    print(f"   exit codes {sorted(codes)}")


def clicks(env: dict[str, str], port: int, charged: Path) -> None:
    """Three clicks at once; the server's charge holds its lock until ``charged`` exists."""
    print("== 2. three clicks on 'charge order 7' at once, under flask run")
    url = f"http://127.0.0.1:{port}/orders/7/charge"
    answers: list[tuple[int, str]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(request(url, "POST"))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(answers) == 2, "two clicks answered while the first charges")
    finally:
        charged.touch()  # the payment provider answered: the charge may finish
    for thread in threads:
        thread.join(60)
    for status, body in sorted(answers):
        print(f"   {status}: {body}")
    status, body = request(url, "POST")
    print(f"   a later click: {status}: {body}")


def status_pages(env: dict[str, str], port: int, hosts: str) -> None:
    print("== 3. the status blueprint and flask zk holders")
    status, body = request(f"http://127.0.0.1:{port}/zk/health")
    print(f"   /zk/health: {status} {json.loads(body)['state']}")
    from zk_recipes import ZkClient
    from zk_recipes.frameworks import lock_path

    with (
        ZkClient(hosts, namespace="shop") as client,
        Lock(client, lock_path("nightly-export"), identifier="export job"),
    ):
        _, page = request(f"http://127.0.0.1:{port}/zk/")
        print(f"   /zk/ lists the held lock: {'/zk-recipes/locks/nightly-export' in page}")
        listing = flask("zk", "holders", "--json", env=env)
        report = json.loads(listing.communicate(timeout=60)[0])
        (entry,) = [r for r in report if r["path"] == "/zk-recipes/locks/nightly-export"]
        print(f"   flask zk holders: held by {entry['holders'][0]['id']!r}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer() as zookeeper:
        scratch = Path(tmp)
        env = dict(
            os.environ,
            ZK_HOSTS=zookeeper.connect_string,
            PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), str(ROOT / "integrations")]),
            PYTHONUNBUFFERED="1",
        )
        cron(env, scratch)
        port = free_port()
        charged = scratch / "order-charged"
        server_env = dict(env, DEMO_HOLD_UNTIL=str(charged))
        server = flask("run", "--port", str(port), "--no-reload", env=server_env)
        try:
            wait_until(lambda: request(f"http://127.0.0.1:{port}/zk/health")[0] == 200, "up")
            clicks(env, port, charged)
            status_pages(env, port, zookeeper.connect_string)
        finally:
            charged.touch()  # never leave a charge waiting, whatever happened
            server.terminate()
            server.communicate(timeout=30)
    print("flask demo finished")


if __name__ == "__main__":
    main()
