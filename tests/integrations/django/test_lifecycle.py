"""The client's life in Django processes: nothing at start-up, one per process, new after fork.

- ``django.setup()`` and the commands that do not use ZooKeeper open no
  connection: ``HOSTS`` points at a listening socket of the test, which must
  see no connection attempt at all.
- A forked child (gunicorn ``--preload``, uWSGI) gets a session of its own
  and leaves the parent's alone.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import zk_recipes_django
from tests.integrations._fork import assert_a_fork_gets_its_own_session
from zk_recipes import ConnectionState, ZkClient

from .conftest import MANAGE, manage_env


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket standing in for ZooKeeper: it counts connection attempts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    yield sock
    sock.close()


def _accepted(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_setup_checks_and_other_commands_open_no_connection(
    listener: socket.socket, zk_namespace: str
) -> None:
    port = listener.getsockname()[1]
    env = manage_env(f"127.0.0.1:{port}", zk_namespace)
    setup = "import django; django.setup(); from django.apps import apps; print(apps.ready)"
    run = subprocess.run(
        [sys.executable, "-c", setup], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.strip() == "True", run.stderr
    for args in (["check"], ["help"], ["zklock", "--help"], ["showmigrations", "zk_recipes"]):
        run = subprocess.run(
            [sys.executable, str(MANAGE), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, (args, run.stderr)
    assert _accepted(listener) == 0


def test_a_forked_child_gets_its_own_session_and_leaves_the_parents_alone(
    zk_settings: dict[str, Any],
) -> None:
    assert_a_fork_gets_its_own_session(zk_recipes_django.get_client)


def test_close_all_ends_the_session_and_the_next_use_opens_a_new_one(
    zk_settings: dict[str, Any],
) -> None:
    first: ZkClient = zk_recipes_django.get_client()
    zk_recipes_django.close_all()
    assert first.state is ConnectionState.CLOSED
    assert zk_recipes_django.current_client() is None
    second = zk_recipes_django.get_client()
    assert second is not first
    assert second.state is ConnectionState.CONNECTED
