"""The outage rule: a guarded run that cannot reach ZooKeeper answers 69, soon, and never "busy".

Against a closed port, a black-holed proxy (every byte dropped: a partition)
and a paused server (SIGSTOP: connections stay open, nothing answers). The
bounds asserted are generous upper limits that prove "no hang" and "within
--timeout / the connection timeout", never a speed.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zk_recipes import LeaderLatch, Lock, ZkClient
from zk_recipes.cli import ExitCode, connect_timeout, default_grace, run_as_leader, run_locked
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import TcpProxy, ZooKeeperServer, free_ports, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _never(where: Path) -> list[str]:
    """A command that must not run: it leaves a file if it does."""
    return ["sh", "-c", f"touch {where}/ran"]


def _timed(run: Callable[[], int]) -> tuple[int, float]:
    began = time.monotonic()
    code = run()
    return code, time.monotonic() - began


@pytest.fixture
def through_proxy(
    zk_proxy: TcpProxy, zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> Iterator[Callable[..., ZkClient]]:
    """Clients of the private server through the proxy (2 s connection timeout); healed after."""

    def make(**options: object) -> ZkClient:
        options.setdefault("connection_timeout", 2.0)
        options.setdefault("session_timeout", 3.0)
        return zk_client_factory(hosts=zk_proxy.connect_string, **options)

    try:
        yield make
    finally:
        zk_proxy.heal()
        if zk_private_server.is_paused:
            zk_private_server.resume()


def test_the_connect_bound_is_the_connection_timeout_cut_to_the_timeout() -> None:
    assert connect_timeout(15.0, None) == 15.0
    assert connect_timeout(15.0, 2.5) == 2.5
    assert connect_timeout(1.0, 30.0) == 1.0
    assert connect_timeout(15.0, 0) == 15.0  # --timeout 0: no holder waited for; still a connect


def test_the_default_grace_is_half_the_margin_before_the_server_may_expire(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(session_timeout=4.0, simulated_expiry_fraction=0.6)
    timeout = client.negotiated_session_timeout
    assert timeout is not None
    assert default_grace(client) == pytest.approx((1 - 0.6) * timeout / 2)


@pytest.mark.parametrize("fault", ["blackhole", "pause"])
def test_no_wait_against_a_silent_server_is_unavailable_never_busy(
    fault: str,
    through_proxy: Callable[..., ZkClient],
    zk_proxy: TcpProxy,
    zk_private_server: ZooKeeperServer,
    tmp_path: Path,
) -> None:
    client = through_proxy()
    if fault == "blackhole":
        zk_proxy.blackhole()
    else:
        zk_private_server.pause()
    out = io.StringIO()
    code, took = _timed(lambda: run_locked(client, "job", _never(tmp_path), wait=False, out=out))
    assert code == ExitCode.UNAVAILABLE, out.getvalue()
    assert "busy" not in out.getvalue()
    assert "held by" not in out.getvalue()
    assert "unreachable" in out.getvalue()
    assert took < 10  # a generous bound: the acquire's first try and one check, no hang
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [None, 60.0])
def test_a_wait_in_line_ends_unavailable_once_zookeeper_is_out_of_reach(
    timeout: float | None,
    through_proxy: Callable[..., ZkClient],
    zk_proxy: TcpProxy,
    zk_private_server: ZooKeeperServer,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    holder = Lock(zk_client_factory(hosts=zk_private_server.connect_string), lock_path("job"))
    assert holder.acquire()
    client = through_proxy()
    out = io.StringIO()
    result: list[int] = []
    runner = threading.Thread(
        target=lambda: result.append(
            run_locked(client, "job", _never(tmp_path), timeout=timeout, out=out, live=False)
        ),
        daemon=True,
    )
    runner.start()
    wait_until(lambda: len(holder.contenders()) == 2, "queued behind the holder", timeout=10)
    zk_proxy.blackhole()
    began = time.monotonic()
    runner.join(30)
    assert result == [ExitCode.UNAVAILABLE], out.getvalue()
    # The session is declared lost within its timeout (3 s), then down for the connection
    # timeout (2 s): far within --timeout 60, and no endless wait without one.
    assert time.monotonic() - began < 20
    assert "ZooKeeper is unreachable" in out.getvalue()
    assert not (tmp_path / "ran").exists()
    holder.release()


def test_a_timeout_shorter_than_the_connection_timeout_bounds_the_wait(
    through_proxy: Callable[..., ZkClient],
    zk_proxy: TcpProxy,
    zk_private_server: ZooKeeperServer,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    holder = Lock(zk_client_factory(hosts=zk_private_server.connect_string), lock_path("job"))
    assert holder.acquire()
    client = through_proxy(connection_timeout=10.0)
    zk_proxy.blackhole()
    out = io.StringIO()
    code, took = _timed(lambda: run_locked(client, "job", _never(tmp_path), timeout=1.0, out=out))
    # Held, but nobody can tell: not "timed out" (124), which would blame the holder.
    assert code == ExitCode.UNAVAILABLE, out.getvalue()
    assert took < 5  # --timeout 1, plus the acquire's first try and one check
    holder.release()


@pytest.mark.slow
def test_a_standby_ends_unavailable_once_zookeeper_is_out_of_reach(
    through_proxy: Callable[..., ZkClient],
    zk_proxy: TcpProxy,
    zk_private_server: ZooKeeperServer,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    leader = LeaderLatch(zk_client_factory(hosts=zk_private_server.connect_string), "/beat")
    leader.start()
    assert leader.await_leadership(10)
    client = through_proxy()
    out = io.StringIO()
    result: list[int] = []
    standby = threading.Thread(
        target=lambda: result.append(
            run_as_leader(client, "/beat", _never(tmp_path), out=out, live=False)
        ),
        daemon=True,
    )
    standby.start()
    wait_until(lambda: len(leader.participants()) == 2, "standing by", timeout=10)
    zk_proxy.blackhole()
    standby.join(30)
    assert result == [ExitCode.UNAVAILABLE], out.getvalue()
    assert not (tmp_path / "ran").exists()
    leader.close()


# -- the command line: connecting ---------------------------------------------------------


@pytest.fixture
def cli_env(zk_namespace: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
    env.update(
        ZK_RECIPES_NAMESPACE=zk_namespace,
        ZK_RECIPES_SESSION_TIMEOUT="3",
        ZK_RECIPES_CONNECTION_TIMEOUT="10",
    )
    return env


def _cli(env: dict[str, str], *args: str) -> tuple[int, str, float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "zk_recipes", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr, time.monotonic() - began


def test_the_cli_against_a_closed_port_exits_69_within_the_timeout(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    env = dict(cli_env, ZK_RECIPES_HOSTS=f"127.0.0.1:{port}")
    code, err, took = _cli(env, "lock", "--timeout", "1", "job", "--", *_never(tmp_path))
    assert code == ExitCode.UNAVAILABLE, err
    assert "unreachable" in err
    assert took < 8  # within --timeout 1 (plus start-up), not the 10 s connection timeout
    code, err, _ = _cli(
        dict(env, ZK_RECIPES_CONNECTION_TIMEOUT="1"), "leader", "job", "--", *_never(tmp_path)
    )
    assert code == ExitCode.UNAVAILABLE, err
    assert not (tmp_path / "ran").exists()


def test_the_cli_against_a_silent_server_exits_69_never_busy(
    cli_env: dict[str, str], zk_proxy: TcpProxy, tmp_path: Path
) -> None:
    env = dict(cli_env, ZK_RECIPES_HOSTS=zk_proxy.connect_string)
    zk_proxy.blackhole()  # connections are accepted, and nothing ever answers
    try:
        code, err, took = _cli(env, "lock", "--timeout", "1", "job", "--", *_never(tmp_path))
        assert code == ExitCode.UNAVAILABLE, err
        assert took < 8
        quick = dict(env, ZK_RECIPES_CONNECTION_TIMEOUT="1")
        code, err, _ = _cli(quick, "lock", "--no-wait", "job", "--", *_never(tmp_path))
        assert code == ExitCode.UNAVAILABLE, err
        assert "busy" not in err
        assert "held by" not in err
    finally:
        zk_proxy.heal()
    assert not (tmp_path / "ran").exists()
