"""Fixtures of the ``zk-recipes`` command's tests: its environment, and its runs cleaned up."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.processes import CliRun


@pytest.fixture
def cli_env(zk_hosts: str, zk_namespace: str) -> dict[str, str]:
    """The environment of a run against this test's namespace: 3 s sessions."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
    env.update(
        ZK_RECIPES_HOSTS=zk_hosts,
        ZK_RECIPES_NAMESPACE=zk_namespace,
        ZK_RECIPES_SESSION_TIMEOUT="3",
        ZK_RECIPES_CONNECTION_TIMEOUT="10",
    )
    return env


@pytest.fixture
def cli_runs() -> Iterator[list[CliRun]]:
    """Runs the test appends here are killed and reaped after it, if still running."""
    runs: list[CliRun] = []
    yield runs
    for run in runs:
        if run.running():
            run.process.kill()
        run.wait()
