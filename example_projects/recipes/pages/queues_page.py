"""The example of docs/recipes/queues.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/queues_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

import threading
from typing import Any

sent = threading.Event()


def send_invoice(invoice: int) -> None:
    if invoice == 44:
        sent.set()


def main(hosts: str) -> None:
    # --8<-- [start:example]
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


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("queues: ok")
