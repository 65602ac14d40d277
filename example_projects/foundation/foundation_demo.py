"""The zk-recipes demo: a real, throwaway ZooKeeper and a client living through faults.

Run it with ``scripts/demo.sh`` (which installs what it needs). It shows:

1. the client's state changes as the server restarts (SUSPENDED -> RECONNECTED,
   same session) and as it is paused for longer than the session timeout
   (LOST declared by the client itself, before the server could hand our
   nodes to anyone, then RECONNECTED on a new session);
2. a protected create (Curator's ``_c_<uuid>-`` names) whose reply is lost on
   the way back, recovered without leaving an orphan;
3. a guaranteed delete issued while the network is cut, completed in the
   background once it heals;
4. ``close()`` removing the client's ephemeral nodes at once.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from zk_recipes import ConnectionState, CreateMode, StateChange, WatchEvent, ZkClient
from zk_recipes.testing import TcpProxy, ZooKeeperServer

T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.2f}s] {message}", flush=True)


def show_state(change: StateChange) -> None:
    how = " (declared by the client: no reply for too long)" if change.simulated else ""
    say(f"    state -> {change.state.name}{how}, session {change.session_id:#x}")


def check(ok: bool, what: str) -> None:
    """Stop the demo with a clear message if something did not behave."""
    if not ok:
        raise SystemExit(f"demo failed: {what}")


def wait_for(seen: list[ConnectionState], state: ConnectionState, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while state not in seen:
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: no {state.name} within {timeout} s")
        time.sleep(0.02)


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    say("starting a throwaway ZooKeeper 3.8 on loopback ...")
    with ZooKeeperServer() as server, TcpProxy(server.host, server.port) as proxy:
        say(f"ZooKeeper is up at {server.connect_string} (log: {server.log_path})")
        seen: list[ConnectionState] = []
        # LOST is declared after 90% of the session timeout without a reply (the
        # default is 66%; 90% leaves room for step 2's slow reconnect on a busy box).
        client = ZkClient(
            proxy.connect_string,
            namespace="demo",
            session_timeout=8.0,
            simulated_expiry_fraction=0.9,
        )
        client.add_listener(show_state)
        client.add_listener(lambda change: seen.append(change.state))
        observer = ZkClient(server.connect_string, namespace="demo")
        with client, observer:
            wait_for(seen, ConnectionState.CONNECTED)
            timeout = client.negotiated_session_timeout
            say(f"client connected; negotiated session timeout {timeout} s")

            say("1a. restarting the server: the session must survive")
            member = client.create(
                "/members/worker-",
                mode=CreateMode.EPHEMERAL_SEQUENTIAL,
                parents=True,
                protected=True,
            )
            session = client.session_id
            seen.clear()
            server.restart()
            wait_for(seen, ConnectionState.RECONNECTED)
            same = "same" if client.session_id == session else "NEW"
            say(
                f"    back on the {same} session; {member.path} still there: "
                f"{client.exists(member.path) is not None}"
            )

            say("1b. pausing the server (SIGSTOP) for 10 s, longer than the 8 s session")
            seen.clear()
            paused_at = time.monotonic()
            server.pause()
            wait_for(seen, ConnectionState.LOST)
            say(
                f"    LOST known {time.monotonic() - paused_at:.2f} s into the pause: recipes "
                "drop their locks now, before the server expires the session"
            )
            time.sleep(max(0.0, 10.0 - (time.monotonic() - paused_at)))
            server.resume()
            wait_for(seen, ConnectionState.RECONNECTED)
            say(
                f"    resumed: new session {client.session_id:#x}; old ephemeral gone: "
                f"{client.exists(member.path) is None}"
            )

            say("2. protected create whose reply is lost (the proxy drops server->client bytes)")
            client.ensure_path("/locks/job")
            seen.clear()
            proxy.drop_replies()

            def heal_when_suspended() -> None:
                wait_for(seen, ConnectionState.SUSPENDED)
                proxy.heal()

            healer = threading.Thread(target=heal_when_suspended)
            healer.start()
            created = client.create(
                "/locks/job/lock-", mode=CreateMode.EPHEMERAL_SEQUENTIAL, protected=True
            )
            healer.join()
            children = observer.get_children("/locks/job")
            check(len(children) == 1, f"expected exactly one node, found {children}")
            check(created.path == f"/locks/job/{children[0]}", "create returned another node")
            say(f"    create returned {created.path.rsplit('/', 1)[1]}")
            say(f"    nodes on the server: {children} -> no orphan: {len(children) == 1}")
            say(f"    fencing token (czxid): {created.stat.czxid}")

            say("3. guaranteed delete while the network is cut")
            client.create("/jobs/done-marker", parents=True)
            seen.clear()
            proxy.cut()
            wait_for(seen, ConnectionState.SUSPENDED)
            client.delete("/jobs/done-marker", guaranteed=True)
            say(
                f"    pending in the background: {client.pending_deletes()}; "
                f"still on the server: {observer.exists('/jobs/done-marker') is not None}"
            )
            proxy.heal()
            check(client.wait_for_deletes(15), "the guaranteed delete never finished")
            deleted = observer.exists("/jobs/done-marker") is None
            check(deleted, "the node is still there")
            say(f"    network healed -> deleted: {deleted}")

            say("4. close() removes our ephemeral nodes at once")
            gone = threading.Event()

            def on_delete(event: WatchEvent) -> None:
                gone.set()

            live = client.create("/workers/me", mode=CreateMode.EPHEMERAL, parents=True)
            check(observer.exists(live.path, watch=on_delete) is not None, "node missing")
            closed_at = time.monotonic()
            client.close()
            check(gone.wait(5), "the ephemeral node outlived close()")
            say(
                f"    ephemeral node gone {1000 * (time.monotonic() - closed_at):.0f} ms after "
                "close() (not after the session timeout)"
            )
    say("demo finished: all steps behaved as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
