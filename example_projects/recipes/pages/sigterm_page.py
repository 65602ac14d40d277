"""The SIGTERM example of docs/client.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/sigterm_page.py HOSTS NAMESPACE`` holds the lock
``/locks/nightly`` until SIGTERM; tests/client/test_closing.py sends it and
checks the lock's node is gone as the process exits, not a session timeout
later. Run without HOSTS, it is a no-op (the recipe pages' runner imports it).
"""

from __future__ import annotations

import sys
import threading

from zk_recipes import Lock, ZkClient


def run(zk: ZkClient) -> None:
    """The program's work: hold the nightly lock, say so, and wait to be stopped."""
    with Lock(zk, "/locks/nightly"):
        print("holding", flush=True)
        threading.Event().wait()


def main(hosts: str) -> None:
    """For the recipe pages' runner: nothing to run without a signal to send."""


def serve(hosts: str, namespace: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble), namespace (your app's), run (your program: it takes a client)
    import signal
    import sys

    from zk_recipes import ZkClient

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    with ZkClient(hosts, namespace=namespace) as zk:  # closed on the way out
        run(zk)
    # --8<-- [end:example]


if __name__ == "__main__" and len(sys.argv) > 2:
    serve(sys.argv[1], sys.argv[2])
