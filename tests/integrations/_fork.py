"""What the Django and Flask tests check of a fork (gunicorn --preload, uWSGI)."""

from __future__ import annotations

import os
from collections.abc import Callable

from zk_recipes import ConnectionState, CreateMode, ZkClient


def assert_a_fork_gets_its_own_session(get_client: Callable[[], ZkClient]) -> None:
    """A child forked after the parent connected gets a session of its own from
    ``get_client()``; the parent's session, its ephemeral node and its client are
    untouched, and the child's node goes with the child's session."""
    parent = get_client()
    parent_session = parent.session_id
    mine = parent.create("/parent-", mode=CreateMode.EPHEMERAL_SEQUENTIAL).path
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its session and node, then leave without atexit
        code = 1
        try:
            child = get_client()
            node = child.create("/child-", mode=CreateMode.EPHEMERAL_SEQUENTIAL).path
            os.write(write, f"{child.session_id} {node}".encode())
            child.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    child_session, child_node = answer.split()
    assert int(child_session) != parent_session
    assert parent.session_id == parent_session
    assert parent.state is ConnectionState.CONNECTED
    assert parent.exists(mine) is not None
    assert parent.exists(child_node) is None
    assert get_client() is parent
