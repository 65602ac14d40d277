"""The ``zk-recipes`` command against an ensemble that is not there: one line, exit 69.

Seen before: without ``-v`` the command printed about 35 of kazoo's
"Connection dropped" lines before its own message. kazoo's line per attempt
is DEBUG now; the command's own message names the ensemble and the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from zk_recipes.cli import ExitCode
from zk_recipes.testing import free_ports

COMMANDS = [["status"], ["holders"], ["ensemble"], ["lock", "x", "--", "true"]]
#: The commands that must not wait: a closed port ends them once every server refused.
AT_ONCE = [["status"], ["holders"], ["ensemble"], ["lock", "x", "--no-wait", "--", "true"]]


def _env(hosts: str, connection_timeout: float = 3) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
    env.update(ZK_RECIPES_HOSTS=hosts, ZK_RECIPES_CONNECTION_TIMEOUT=str(connection_timeout))
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


@pytest.mark.parametrize("args", AT_ONCE, ids=[" ".join(a[:3]) for a in AT_ONCE])
def test_a_command_that_must_not_wait_ends_once_every_server_refused(args: list[str]) -> None:
    """Not after the connection timeout (60 s here): nothing listens, nothing comes of waiting."""
    ports = free_ports(2)
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "zk_recipes", *args],
        env=_env(",".join(f"127.0.0.1:{port}" for port in ports), connection_timeout=60),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == ExitCode.UNAVAILABLE, run.stderr
    assert "every server of" in run.stderr
    assert "refused the connection" in run.stderr
    assert time.monotonic() - began < 30, "it waited for the connection timeout"
