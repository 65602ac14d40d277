"""The FastAPI face end to end: run `python example_projects/fastapi_app/fastapi_demo.py`.

Starts a throwaway ZooKeeper, then serves the quick start's app
(``orders_api.py``) from a real ``uvicorn --workers 2``:

1. three clicks on "charge order 7" at once: one charges (200), two get 423
   at once, whichever worker they reach; a later click charges again with a
   higher fencing token;
2. ``/zk/health`` answers 200 for the load balancer;
3. ZooKeeper paused (SIGSTOP: connections accepted, nothing answered): a
   charge answers 503 with ``Retry-After`` at once, never "busy", never a
   hang; resumed, charges go through again;
4. the server stopped while a click holds its lock: the lifespan closes the
   session, and the lock is free by the time uvicorn has exited (not a session
   timeout later).

The click that gets the lock keeps it until the demo has seen the others
refused: the demo gives the app ``DEMO_HOLD_UNTIL``, a file it creates then
(``gateway.py``), so no step depends on how fast the machine is.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from zk_recipes import ZkClient
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import ZooKeeperServer

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def request(url: str, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    try:
        sent = urllib.request.Request(url, method=method)
        with urllib.request.urlopen(sent, timeout=90) as answer:
            return answer.status, answer.read().decode().strip(), dict(answer.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode().strip(), dict(refused.headers)
    except urllib.error.URLError:  # not listening yet
        return 0, "", {}


def wait_until(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: {what} did not happen within {timeout:g}s")
        time.sleep(0.05)


def serve(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    """`uvicorn orders_api:app --workers 2`, as a deployment would run it."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "orders_api:app",
            "--workers",
            "2",
            "--port",
            str(port),
            "--timeout-graceful-shutdown",
            "1",
            "--log-level",
            "critical",  # step 4's cancelled request is logged as an error: it is the point
        ],
        env=env,
        cwd=HERE,
        text=True,
    )


def main() -> None:
    with ZooKeeperServer() as server, tempfile.TemporaryDirectory() as scratch:
        hold = Path(scratch) / "charged"
        env = dict(
            os.environ,
            ZK_RECIPES_HOSTS=server.connect_string,
            ZK_RECIPES_SESSION_TIMEOUT="4",
            DEMO_HOLD_UNTIL=str(hold),
        )
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        app = serve(env, port)
        with ZkClient(server.connect_string) as zk:
            try:
                wait_until(lambda: request(f"{base}/zk/health")[0] == 200, "the app up")
                print("== 1. three clicks on 'charge order 7' at once (uvicorn, two workers)")
                answers: list[tuple[int, str]] = []

                def click() -> None:
                    status, body, _ = request(f"{base}/orders/7/charge", "POST")
                    answers.append((status, body))

                clicks = [threading.Thread(target=click) for _ in range(3)]
                for thread in clicks:
                    thread.start()
                wait_until(lambda: len(answers) == 2, "two clicks answered")
                for status, body in answers:
                    print(f"   {status}: {body}")
                hold.touch()  # the charging click may finish now
                for thread in clicks:
                    thread.join(60)
                status, body = answers[-1]
                print(f"   {status}: {body}")
                status, later, _ = request(f"{base}/orders/7/charge", "POST")
                print(f"   a later click: {status} {later}")

                print("== 2. the health route")
                status, body, _ = request(f"{base}/zk/health")
                print(f"   /zk/health: {status} {body}")

                print("== 3. ZooKeeper paused: answers at once, never 'busy'")
                server.pause()
                try:
                    began = time.monotonic()
                    status, body, headers = request(f"{base}/orders/8/charge", "POST")
                    took = time.monotonic() - began
                    print(f"   charge: {status} {body} Retry-After={headers.get('retry-after')}")
                    print(f"   answered in under 5 s: {took < 5}")
                finally:
                    server.resume()
                wait_until(
                    lambda: request(f"{base}/orders/8/charge", "POST")[0] == 200,
                    "a charge going through again",
                    60,
                )
                print("   resumed: a charge goes through again: 200")

                print("== 4. the server stopped while a click holds its lock")
                hold.unlink()
                holding = threading.Thread(target=request, args=(f"{base}/orders/9/charge", "POST"))
                holding.start()
                wait_until(lambda: _children(zk, lock_path("order-9")) == 1, "the lock held")
                print(f"   held: {_children(zk, lock_path('order-9'))} node")
                app.send_signal(signal.SIGTERM)
                app.wait(30)
                print(f"   after uvicorn exited: {_children(zk, lock_path('order-9'))} nodes")
                hold.touch()
            finally:
                if app.poll() is None:
                    app.kill()
                    app.wait(10)
    print("fastapi demo finished")


def _children(zk: ZkClient, path: str) -> int:
    try:
        return len(zk.get_children(path))
    except Exception:  # the lock's directory is a container: gone once empty
        return 0


if __name__ == "__main__":
    main()
