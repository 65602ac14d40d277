"""Leader election two ways: run `python example_projects/recipes/leader_example.py`.

Starts a throwaway ZooKeeper, then:

1. LeaderLatch: three schedulers (think: three hosts) join one election. Only
   the leader publishes, handing its fencing token to a store that refuses
   stale tokens. The leader shuts down; another takes over at once.
2. LeaderSelector: three workers take turns at a job. Each term is one call
   of take_leadership(ctx); returning hands the job to the next worker.
"""

from __future__ import annotations

import threading

from zk_recipes import LeaderLatch, LeaderSelector, LeadershipContext, ZkClient
from zk_recipes.testing import ZooKeeperServer


class FencedStore:
    """Accepts a write only with a token at least as high as every token seen so far."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.highest = 0
        self.log: list[tuple[str, int]] = []

    def write(self, who: str, token: int) -> None:
        with self._guard:
            if token < self.highest:
                raise RuntimeError(f"stale write from {who} (token {token} < {self.highest})")
            self.highest = token
            self.log.append((who, token))


class Announcer:
    """A LeaderLatchListener: says when its scheduler gains or loses leadership."""

    def __init__(self, name: str, elected: threading.Event) -> None:
        self.name = name
        self.elected = elected

    def is_leader(self) -> None:
        print(f"{self.name}: I am the leader now")
        self.elected.set()

    def not_leader(self) -> None:
        print(f"{self.name}: no longer the leader")


def latch_demo(hosts: str) -> None:
    store = FencedStore()
    elected = threading.Event()
    names = ("scheduler-a", "scheduler-b", "scheduler-c")
    clients = [ZkClient(hosts, namespace="example").start() for _ in names]
    latches = []
    for name, client in zip(names, clients, strict=True):
        latch = LeaderLatch(client, "/elections/scheduler", name)
        latch.add_listener(Announcer(name, elected))
        latches.append(latch.start())
    try:
        elected.wait(10)
        leader = next(latch for latch in latches if latch.has_leadership())
        for _ in range(3):  # a few ticks: only the leader publishes
            for latch in latches:
                if latch.has_leadership():
                    store.write(latch.identifier, latch.fencing_token)
        print("participants:", [(p.id, p.is_leader) for p in leader.participants()])
        print(f"{leader.identifier} shuts down")
        elected.clear()
        leader.close()  # its node is deleted: the next in line leads at once
        elected.wait(10)
        successor = next(latch for latch in latches if latch.has_leadership())
        store.write(successor.identifier, successor.fencing_token)
        print(
            f"failover: {successor.identifier} took over from {leader.identifier}, "
            f"token {leader.fencing_token} -> {successor.fencing_token}"
        )
        print(f"store accepted {len(store.log)} writes, none stale")
    finally:
        for latch in latches:
            latch.close()
        for client in clients:
            client.close()


def selector_demo(hosts: str) -> None:
    turns: list[tuple[str, int]] = []
    done = threading.Event()
    guard = threading.Lock()

    def worker(name: str) -> LeaderSelector:
        def take_leadership(ctx: LeadershipContext) -> None:
            # Work in small steps and stop when asked: ctx.cancelled is set on
            # SUSPENDED / LOST, or when the selector is closed.
            for _ in range(3):
                if ctx.cancelled.wait(0.01):
                    return
            with guard:
                if done.is_set():
                    return  # a term that began as the demo closes: not counted
                turns.append((name, ctx.fencing_token))
                if len(turns) >= 6:
                    done.set()

        client = ZkClient(hosts, namespace="example").start()
        return LeaderSelector(
            client, "/elections/job", take_leadership, identifier=name, auto_requeue=True
        )

    selectors = [worker(name) for name in ("worker-1", "worker-2", "worker-3")]
    for selector in selectors:
        selector.start()
    try:
        done.wait(30)
    finally:
        for selector in selectors:
            selector.close()
            selector.client.close()
    tokens = [token for _, token in turns]
    print("turns:", [name for name, _ in turns])
    print(f"{len(turns)} terms taken in turn, tokens increasing: {tokens == sorted(tokens)}")


def main() -> None:
    with ZooKeeperServer() as server:
        latch_demo(server.connect_string)
        selector_demo(server.connect_string)


if __name__ == "__main__":
    main()
