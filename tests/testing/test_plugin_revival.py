"""The pytest plugin restarts a dead shared server and says so in the summary."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INNER_TESTS = """
import os
import signal
import time

from zk_recipes.testing import ZooKeeperServer


def test_kills_the_shared_server(zk_server: ZooKeeperServer) -> None:
    os.kill(zk_server.pid, signal.SIGKILL)  # from outside the harness, as a crash
    deadline = time.monotonic() + 10
    while zk_server.is_running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert zk_server.exit_status == "killed by SIGKILL"


def test_after_the_death(zk_client, zk_server: ZooKeeperServer) -> None:
    zk_client.create("/survived", b"yes")
    assert zk_client.get("/survived")[0] == b"yes"
    assert zk_server.is_running
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_dead_shared_server_is_restarted_and_reported(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["zk_recipes.testing.pytest_plugin"]\n')
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*zk_recipes harness: the shared ZooKeeper server died*",
            "*found dead (killed by SIGKILL) before test_inner.py::test_after_the_death;*",
        ]
    )
