"""Django's locked views when ZooKeeper is down: 503 at once, 423 only when held, never a hang.

Seen before: with an unreachable ensemble every ``@zk_lock`` request blocked
15 s (the connection timeout), then 500 (``ConnectTimeoutError``). A missing
ensemble is a closed port; a paused one a black-holed proxy (TCP accepted,
nothing answered). The bounds are far under the connection timeout (30 s
here): they prove "no waiting for a connection", not a speed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client, RequestFactory

import zk_recipes_django
from zk_recipes import ConnectionState, Lock, UnavailableError, ZkClient
from zk_recipes.frameworks import RETRY_AFTER, lock_path
from zk_recipes.testing import StateRecorder, TcpProxy, ZooKeeperServer, free_ports
from zk_recipes_django import locked, zk_lock

CONNECTION_TIMEOUT = 30.0
AT_ONCE = 5.0
UNAVAILABLE_BODY = b"Service Unavailable: try again shortly.\n"


@zk_lock("charge-{pk}")
def charge(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"charged {pk}")


@zk_lock("charge-{pk}")
async def async_charge(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"charged {pk}")


@zk_lock("raise", on_unavailable="raise")
def raises(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ran")


@zk_lock("run", on_unavailable="run")
def runs(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"ran, lock={getattr(request, 'zk_lock', None)!r}")


@zk_lock("cached", on_unavailable=lambda request: HttpResponse("from the cache"))
def cached(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ran")


@zk_lock("job")
def job() -> str:
    return "ran"


def _point_at(settings: Any, zk_namespace: str, hosts: str) -> None:
    settings.ZK_RECIPES = {
        "default": {
            "HOSTS": hosts,
            "NAMESPACE": zk_namespace,
            "SESSION_TIMEOUT": 3.0,
            "CONNECTION_TIMEOUT": CONNECTION_TIMEOUT,
        }
    }


@pytest.fixture
def nowhere(settings: Any, zk_namespace: str) -> Iterator[None]:
    """The "default" alias on a port where nothing listens."""
    (port,) = free_ports(1)
    _point_at(settings, zk_namespace, f"127.0.0.1:{port}")
    yield
    zk_recipes_django.close_all()


@pytest.fixture
def proxied(settings: Any, zk_namespace: str, zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    """The "default" alias through a proxy the test can black-hole."""
    with zk_server.proxy() as proxy:
        _point_at(settings, zk_namespace, proxy.connect_string)
        yield proxy
        zk_recipes_django.close_all()


def _timed(call: Any) -> tuple[HttpResponse, float]:
    began = time.monotonic()
    answer = call()
    return answer, time.monotonic() - began


def _unavailable(answer: HttpResponse, took: float) -> None:
    assert answer.status_code == 503, answer.content
    assert took < AT_ONCE
    assert answer["Retry-After"] == str(RETRY_AFTER)
    assert answer.content == UNAVAILABLE_BODY


@pytest.mark.usefixtures("nowhere")
def test_the_test_client_gets_503_at_once_from_an_ensemble_that_is_not_there(
    client: Client, async_client: AsyncClient
) -> None:
    for _ in range(3):
        _unavailable(*_timed(lambda: client.get("/locked/sync/busy/")))
    _unavailable(*_timed(lambda: asyncio.run(async_client.get("/locked/async/busy/"))))


@pytest.mark.usefixtures("nowhere")
def test_on_unavailable_raise_run_a_callable_and_a_plain_function(
    rf: RequestFactory, caplog: pytest.LogCaptureFixture
) -> None:
    request = rf.get("/")
    with pytest.raises(UnavailableError, match="no connection to ZooKeeper"):
        raises(request)
    with caplog.at_level(logging.WARNING, logger="zk_recipes.django"):
        assert runs(request).content == b"ran, lock=None"
    assert "ran WITHOUT its lock" in caplog.text
    assert cached(request).content == b"from the cache"
    with pytest.raises(UnavailableError):
        job()  # not a view: no response to give, the error
    with pytest.raises(UnavailableError), locked("block"):
        pass
    with locked("block", on_unavailable="run") as lock:
        assert lock is None


def test_a_paused_ensemble_is_503_not_busy_and_held_is_423(
    rf: RequestFactory, proxied: TcpProxy, zk_client: ZkClient
) -> None:
    assert charge(rf.get("/"), pk=1).status_code == 200
    with Lock(zk_client, lock_path("charge-1")):
        assert charge(rf.get("/"), pk=1).status_code == 423, "held elsewhere: busy"
    client = zk_recipes_django.get_client()
    states = StateRecorder()
    client.add_listener(states)

    proxied.blackhole()
    _unavailable(*_timed(lambda: charge(rf.get("/"), pk=2)))  # still CONNECTED, unanswered
    states.wait_for(ConnectionState.SUSPENDED)
    _unavailable(*_timed(lambda: charge(rf.get("/"), pk=3)))
    _unavailable(*_timed(lambda: asyncio.run(async_charge(rf.get("/"), pk=4))))
    with pytest.raises(UnavailableError, match=r"is (SUSPENDED|LOST)"), locked("block", timeout=0):
        pass

    proxied.heal()
    assert client.wait_connected(CONNECTION_TIMEOUT)
    assert charge(rf.get("/"), pk=2).status_code == 200
    with locked("block", timeout=0) as lock:
        assert lock.is_held()


def test_locked_refuses_a_status() -> None:
    with pytest.raises(TypeError, match="a block cannot answer a request with a status"):
        locked("x", on_unavailable=503)  # type: ignore[call-overload]
