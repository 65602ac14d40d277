"""Without a lock path, a consumer killed mid-item loses at most what it says (review 3, Q3).

The consumer runs in a child process that dies (``os._exit``, as kill -9) in
the middle of its 100th item. By default (``batch=1``) only that item is
gone: the next ones were not deleted yet. With ``batch=8`` up to 8 items
(the one in hand and the rest of its batch) may be.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zk_recipes import DistributedQueue, ZkClient

pytestmark = pytest.mark.slow

_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from zk_recipes import DistributedQueue, ZkClient
    hosts, namespace, seen_path, batch = sys.argv[1:5]
    seen = open(seen_path, "a", buffering=1)
    count = 0

    def consume(value, context):
        global count
        count += 1
        if count == 100:
            os._exit(9)  # killed while it holds item 100
        seen.write(value.decode() + "\\n")

    client = ZkClient(hosts, namespace=namespace).start()
    DistributedQueue(client, "/amo", consume, batch=int(batch)).start()
    time.sleep(60)
    """
)


@pytest.mark.parametrize(("batch", "loss_bound"), [(1, 1), (8, 8)])
def test_a_killed_consumer_loses_at_most_its_batch(
    zk_client: ZkClient,
    zk_hosts: str,
    zk_namespace: str,
    tmp_path: Path,
    batch: int,
    loss_bound: int,
) -> None:
    with DistributedQueue(zk_client, "/amo") as producer:
        for number in range(200):
            producer.put(f"item-{number:03d}".encode())
    seen = tmp_path / "seen"
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, zk_hosts, zk_namespace, str(seen), str(batch)],
        timeout=60,
        check=False,
    )
    assert child.returncode == 9
    delivered = seen.read_text().split()
    assert len(delivered) == 99
    left = len(zk_client.get_children("/amo"))
    lost = 200 - len(delivered) - left  # deleted and never delivered, the one in hand included
    assert 1 <= lost <= loss_bound
