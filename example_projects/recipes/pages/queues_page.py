"""The example of docs/recipes/queues.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/queues_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

import threading

sent = threading.Event()


def send_invoice(invoice: int) -> None:
    if invoice == 44:
        sent.set()


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: send_invoice (your work), sent (a threading.Event it sets once invoice 44 is out)
    from typing import Any

    from zk_recipes import JSON, DistributedQueue, ItemContext, ZkClient

    def handle(job: dict[str, Any], context: ItemContext) -> None:
        send_invoice(job["id"])  # your work
        context.transaction().set("/invoices/last", b"...")  # committed with the item's delete

    with ZkClient(hosts, namespace="myapp") as client:
        client.ensure_path("/invoices/last")
        with DistributedQueue(
            client, "/jobs", handle, lock_path="/jobs-locks", serializer=JSON
        ) as jobs:
            jobs.put({"id": 42})
            jobs.put_multi([{"id": 43}, {"id": 44}])  # one node, consumed in order
            sent.wait(30)
    # --8<-- [end:example]
    failing(hosts)


def failing(hosts: str) -> None:
    """The page's example of a consumer that fails: back-off, then a dead letter."""
    # --8<-- [start:failing]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    import time

    from zk_recipes import DistributedQueue, ItemContext, ZkClient

    def charge(order: bytes, context: ItemContext) -> None:
        if order == b"card-expired":
            raise ValueError(f"cannot charge {order.decode()}")  # fails every time
        # ... charge it; context.attempt says which try this is (1, 2, ...)

    with ZkClient(hosts, namespace="myapp") as client:
        with DistributedQueue(
            client,
            "/charges",
            charge,
            lock_path="/charges-locks",
            max_attempts=3,  # then set aside in /charges-dead (default 5)
            retry_backoff=0.1,  # seconds before the 2nd try, doubled each time (default 1)
            retry_backoff_max=60,  # never longer apart than this (the default)
        ) as charges:
            charges.put(b"order-1")
            charges.put(b"card-expired")
            while not charges.dead_letters():  # tried 3 times, about 0.3 s apart
                time.sleep(0.1)
            [letter] = charges.dead_letters()
            print(letter.name, letter.attempts, letter.last_error)
            # -> queue-0000000001 3 ValueError: cannot charge card-expired
            charges.purge_dead()  # or requeue_dead() once the cause is fixed
    # --8<-- [end:failing]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("queues: ok")
