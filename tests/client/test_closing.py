"""A plain script that makes SIGTERM an exit closes its session: its locks go at once.

The example of docs/client.md ("Closing") runs as a real process; after
SIGTERM its lock node must be gone when the process has exited, not a
session timeout (10 s) later.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from zk_recipes import ZkClient

EXAMPLE = Path(__file__).resolve().parents[2] / "example_projects/recipes/pages/sigterm_page.py"


def test_sigterm_becomes_an_exit_that_closes_the_session(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    with subprocess.Popen(
        [sys.executable, str(EXAMPLE), zk_hosts, zk_namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as script:
        try:
            assert script.stdout is not None
            assert script.stdout.readline() == "holding\n"
            assert len(zk_client.get_children("/locks/nightly")) == 1
            script.send_signal(signal.SIGTERM)
            assert script.wait(timeout=10) == 128 + signal.SIGTERM
        finally:
            script.kill()
    # Closed on the way out: no session left to expire, so no node left to wait for.
    # (The released lock also takes its directory with it when nobody else waits.)
    left = zk_client.get_children("/locks/nightly") if zk_client.exists("/locks/nightly") else []
    assert left == []
