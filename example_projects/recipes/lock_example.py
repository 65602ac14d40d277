"""Two workers, one lock: run `python example_projects/recipes/lock_example.py`.

Starts a throwaway ZooKeeper, then two clients (think: two hosts) take turns on
one lock and write to a fenced store that refuses stale tokens.
"""

from __future__ import annotations

import threading

from zk_recipes import Lock, ZkClient
from zk_recipes.testing import ZooKeeperServer


class FencedStore:
    """Accepts a write only with a token higher than every token seen so far."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.highest = 0
        self.log: list[tuple[str, int]] = []

    def write(self, who: str, token: int) -> None:
        with self._guard:
            if token <= self.highest:
                raise RuntimeError(f"stale write from {who} (token {token} <= {self.highest})")
            self.highest = token
            self.log.append((who, token))


def worker(name: str, hosts: str, store: FencedStore, rounds: int) -> None:
    with ZkClient(hosts, namespace="example") as client:
        lock = Lock(client, "/locks/report", identifier=name)
        for _ in range(rounds):
            with lock:
                store.write(name, lock.fencing_token)


def main() -> None:
    with ZooKeeperServer() as server:
        store = FencedStore()
        threads = [
            threading.Thread(target=worker, args=(name, server.connect_string, store, 5))
            for name in ("worker-a", "worker-b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for who, token in store.log:
            print(f"{who} wrote with fencing token {token}")
        print(f"{len(store.log)} writes, all accepted in token order")


if __name__ == "__main__":
    main()
