"""The example of docs/recipes/leader-selector.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/leader_selector_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

import threading

from _stand_ins import Storage

storage = Storage()
led = threading.Event()


def next_batch() -> list[int]:
    led.set()
    return [1, 2, 3]


def serve_forever() -> None:
    led.wait(30)  # here: until the term began; a server would serve until stopped


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: next_batch, serve_forever (your work), storage (your store)
    from zk_recipes import LeaderSelector, LeadershipContext, ZkClient

    def take_leadership(ctx: LeadershipContext) -> None:
        while not ctx.cancelled.is_set():  # cooperative: check, or wait on it
            batch = next_batch()
            storage.write(batch, fencing_token=ctx.fencing_token)
            ctx.cancelled.wait(1.0)

    with ZkClient(hosts, namespace="myapp") as zk:
        with LeaderSelector(zk, "/elections/importer", take_leadership,
                            identifier="host-a", auto_requeue=True):  # fmt: skip
            serve_forever()
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("leader-selector: ok")
