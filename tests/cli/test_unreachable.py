"""The ``zk-recipes`` command against an ensemble that is not there: one line, exit 69.

Seen before: without ``-v`` the command printed about 35 of kazoo's
"Connection dropped" lines before its own message. kazoo's line per attempt
is DEBUG now; the command's own message names the ensemble and the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zk_recipes.cli import ExitCode
from zk_recipes.testing import free_ports

COMMANDS = [["status"], ["holders"], ["lock", "x", "--", "true"]]


def _env(hosts: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
    env.update(ZK_RECIPES_HOSTS=hosts, ZK_RECIPES_CONNECTION_TIMEOUT="3")
    return env


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:1]) for a in COMMANDS])
def test_a_closed_port_is_one_line_and_exit_69_without_kazoos_lines(args: list[str]) -> None:
    (port,) = free_ports(1)
    run = subprocess.run(
        [sys.executable, "-m", "zk_recipes", *args],
        env=_env(f"127.0.0.1:{port}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "Connection refused" in lines[0]
    assert "Traceback" not in run.stderr


def test_with_v_kazoos_lines_are_there_for_whoever_asks() -> None:
    (port,) = free_ports(1)
    run = subprocess.run(
        [sys.executable, "-m", "zk_recipes", "-v", "status"],
        env=_env(f"127.0.0.1:{port}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
    assert "Connection dropped" in run.stderr
