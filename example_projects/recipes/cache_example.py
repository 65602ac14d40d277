"""A TreeCache over a feature-flag tree: read locally, told of every change, exact after a cut.

Run it from a clone: ``python example_projects/recipes/cache_example.py``. It
starts a throwaway ZooKeeper (the ``[testing]`` extra and Java are needed),
so it needs no server of yours.
"""

from __future__ import annotations

import queue

from zk_recipes import CacheEvent, CacheEventType, TreeCache, ZkClient
from zk_recipes.testing import ZooKeeperServer


def main() -> None:
    with ZooKeeperServer() as server, server.proxy() as proxy:
        admin = ZkClient(server.connect_string, namespace="/flags-demo").start()
        admin.create("/flags/checkout", b"on", parents=True)
        admin.create("/flags/search/beta", b"off", parents=True)

        # The service's client goes through a proxy the demo can cut.
        service = ZkClient(proxy.connect_string, namespace="/flags-demo", session_timeout=6)
        service.start()
        events: queue.SimpleQueue[CacheEvent] = queue.SimpleQueue()
        with TreeCache(service, "/flags") as flags:
            flags.listen(events.put)
            flags.wait_initialized(10)
            print("loaded:", sorted(flags.current()))
            checkout = flags.get("/flags/checkout")
            print("checkout is", checkout.data.decode() if checkout and checkout.data else None)

            admin.set("/flags/search/beta", b"on")
            while (event := events.get(timeout=10)).type is not CacheEventType.CHANGED:
                pass
            print("told:", event.type.value, event.path, "->", event.node and event.node.data)

            # Cut the service off; change the tree meanwhile; the cache catches up exactly.
            proxy.blackhole()
            admin.delete("/flags/checkout")
            admin.create("/flags/checkout", b"off")  # deleted and made again while away
            admin.create("/flags/payments", b"on")
            proxy.heal()
            seen = []
            while (event := events.get(timeout=30)).type is not CacheEventType.RESYNCED:
                if event.path is not None:
                    seen.append((event.type.value, event.path))
            print("after the cut:", seen)
            print("resynced:", sorted(flags.current()))
        service.close()
        admin.close()
    print("demo finished")


if __name__ == "__main__":
    main()
