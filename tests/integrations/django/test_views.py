"""``@zk_lock``, ``locked()`` and ``current_lock()`` on real ZooKeeper, through Django's clients.

Views live in site/testapp/views.py; with ``?hold=1`` they wait inside the
lock until the test sets the gate's go, so the tests count who is inside at
once and look at the lock's nodes while it is held. Waits are on events and
watches; the deadlines only turn a hang into a failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client

import zk_recipes_django
from tests.integrations._views import LOCKS, WAIT, hold_elsewhere
from tests.integrations.django.site.testapp import views
from zk_recipes import (
    ConfigurationError,
    Lock,
    LockTimeout,
    RecipeUsageError,
    ZkClient,
)
from zk_recipes.testing import expire_session, wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory
from zk_recipes_django import _settings, current_lock, locked, zk_lock

THREADS = 4


@pytest.fixture(autouse=True)
def gates() -> Iterator[None]:
    views.GATE.reset()
    views.ASYNC_GATE.reset()
    yield
    views.GATE.go.set()  # a failed test leaves no view waiting


@pytest.fixture
def zk(zk_settings: dict[str, Any]) -> ZkClient:
    """The process client of the "default" alias, the one the views use."""
    return zk_recipes_django.get_client()


# -- sync views, requests from threads ------------------------------------------------


def _get_in_threads(url: str, count: int) -> queue.Queue[HttpResponse]:
    answers: queue.Queue[HttpResponse] = queue.Queue()
    start = threading.Barrier(count)

    def one() -> None:
        client = Client()
        start.wait(WAIT)
        answers.put(client.get(url))

    for _ in range(count):
        threading.Thread(target=one, daemon=True).start()
    return answers


def test_sync_view_lets_one_request_in_and_answers_423_to_the_others_at_once(
    zk: ZkClient,
) -> None:
    answers = _get_in_threads("/locked/sync/busy/?hold=1", THREADS)
    refused = [answers.get(timeout=WAIT) for _ in range(THREADS - 1)]
    assert [r.status_code for r in refused] == [423] * (THREADS - 1)
    assert refused[0]["Content-Type"].startswith("text/plain")
    assert refused[0].content == b"Locked: busy, try again shortly.\n"
    assert views.GATE.inside == 1
    views.GATE.go.set()
    assert answers.get(timeout=WAIT).status_code == 200
    assert (views.GATE.entries, views.GATE.most) == (1, 1)
    assert wait_for_children(zk, f"{LOCKS}/sync-gate", 0) == []


def test_sync_view_with_a_timeout_lets_every_request_in_one_after_another(
    zk: ZkClient,
) -> None:
    answers = _get_in_threads("/locked/sync/wait/?hold=1", THREADS)
    assert views.GATE.entered.wait(WAIT)
    wait_for_children(zk, f"{LOCKS}/sync-gate", THREADS)  # all in line
    views.GATE.go.set()
    statuses = [answers.get(timeout=WAIT).status_code for _ in range(THREADS)]
    assert statuses == [200] * THREADS
    assert (views.GATE.entries, views.GATE.most) == (THREADS, 1)
    tokens = [saw["token"] for saw in views.GATE.seen]
    assert tokens == sorted(tokens)  # fencing tokens grow in the order of the holds
    assert len(set(tokens)) == THREADS


# -- async views under AsyncClient ----------------------------------------------------


def test_async_view_lets_one_request_in_and_answers_423_to_the_others(
    zk_settings: dict[str, Any], async_client: AsyncClient
) -> None:
    async def main() -> None:
        gate = views.ASYNC_GATE
        requests = [
            asyncio.ensure_future(async_client.get("/locked/async/busy/?hold=1"))
            for _ in range(THREADS)
        ]
        refused = []
        for finished in asyncio.as_completed(requests):
            refused.append(await finished)
            if len(refused) == THREADS - 1:
                break
        assert [r.status_code for r in refused] == [423] * (THREADS - 1)
        assert gate.inside == 1
        gate.async_go.set()
        answers = await asyncio.gather(*requests)
        assert sorted(r.status_code for r in answers) == [200] + [423] * (THREADS - 1)
        assert (gate.entries, gate.most) == (1, 1)

    asyncio.run(main())


def test_async_view_waits_without_blocking_the_event_loop(
    zk: ZkClient, async_client: AsyncClient
) -> None:
    async def main() -> None:
        gate = views.ASYNC_GATE
        holder = asyncio.ensure_future(async_client.get("/locked/async/wait/?hold=1"))
        await gate.async_entered.wait()
        waiters = asyncio.gather(
            *(async_client.get("/locked/async/wait/?hold=1") for _ in range(THREADS - 1))
        )
        await asyncio.to_thread(wait_for_children, zk, f"{LOCKS}/async-gate", THREADS)
        # Every waiter is in line on the server; the loop still serves others.
        pong = await async_client.get("/locked/async/ping/")
        assert (pong.status_code, pong.content) == (200, b"pong")
        assert not waiters.done()
        assert gate.entries == 1
        gate.async_go.set()
        answers = [await holder, *await waiters]
        assert [r.status_code for r in answers] == [200] * THREADS
        assert (gate.entries, gate.most) == (THREADS, 1)

    asyncio.run(main())


def test_async_views_waiting_for_a_lock_hold_no_thread_each(
    zk: ZkClient, zk_client_factory: ClientFactory, async_client: AsyncClient
) -> None:
    """Fifty requests in line on one lock: they wait on the loop (aio.Lock), not on threads."""
    waiters = 50
    holder = hold_elsewhere(zk_client_factory, "async-gate")
    directory = f"{LOCKS}/async-gate"

    async def main() -> None:
        before = threading.active_count()
        requests = [
            asyncio.ensure_future(async_client.get("/locked/async/wait/")) for _ in range(waiters)
        ]
        await asyncio.to_thread(wait_for_children, zk, directory, waiters + 1, 60.0)
        grown = threading.active_count() - before  # a thread per waiter would be 50
        assert grown < 15, [t.name for t in threading.enumerate()]
        await asyncio.to_thread(holder.release)
        answers = await asyncio.gather(*requests)
        assert [r.status_code for r in answers] == [200] * waiters

    asyncio.run(main())
    assert views.ASYNC_GATE.entries == waiters


def test_cancelled_async_waiter_leaves_no_node_behind(
    zk: ZkClient, zk_client_factory: ClientFactory, async_client: AsyncClient
) -> None:
    holder = hold_elsewhere(zk_client_factory, "async-gate")
    directory = f"{LOCKS}/async-gate"

    async def main() -> None:
        waiter = asyncio.ensure_future(async_client.get("/locked/async/wait/"))
        await asyncio.to_thread(wait_for_children, zk, directory, 2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    # The cancelled request ended after its acquire was called off and its node deleted.
    assert zk.get_children(directory) == [holder.node.rsplit("/", 1)[1]]  # type: ignore[union-attr]
    assert views.ASYNC_GATE.entries == 0
    holder.release()


def test_cancelled_async_waiter_that_got_the_lock_releases_it(
    zk: ZkClient, async_client: AsyncClient
) -> None:
    """Cancelled while inside: the view's finally runs and the lock is released."""
    directory = f"{LOCKS}/async-gate"

    async def main() -> None:
        request = asyncio.ensure_future(async_client.get("/locked/async/busy/?hold=1"))
        await views.ASYNC_GATE.async_entered.wait()
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(main())
    assert wait_for_children(zk, directory, 0) == []


def test_async_on_busy_callable_is_awaited(
    zk_settings: dict[str, Any], zk_client_factory: ClientFactory, async_client: AsyncClient
) -> None:
    holder = hold_elsewhere(zk_client_factory, "custom-busy")
    answer = asyncio.run(async_client.get("/locked/async/custom/"))
    assert (answer.status_code, answer.content) == (409, b"conflict")
    holder.release()


# -- names ----------------------------------------------------------------------------


def test_template_name_excludes_the_same_pk_only(zk: ZkClient, client: Client) -> None:
    first = _get_in_threads("/locked/invoice/7/?hold=1", 1)
    assert views.GATE.entered.wait(WAIT)
    assert client.get("/locked/invoice/8/").status_code == 200
    assert client.get("/locked/invoice/7/").status_code == 423
    assert zk.get_children(f"{LOCKS}/invoice-7") != []
    views.GATE.go.set()
    assert first.get(timeout=WAIT).status_code == 200
    assert [saw["path"] for saw in views.GATE.seen] == [
        f"{LOCKS}/invoice-7",
        f"{LOCKS}/invoice-8",
    ]


def test_a_slash_in_a_value_stays_inside_the_lock_directory(zk: ZkClient) -> None:
    first = _get_in_threads("/locked/invoice/a/../b/?hold=1", 1)
    assert views.GATE.entered.wait(WAIT)
    (saw,) = views.GATE.seen
    assert saw["path"] == f"{LOCKS}/invoice-a%2F..%2Fb"
    assert "invoice-a%2F..%2Fb" in zk.get_children(LOCKS)
    assert saw["node"].startswith(f"{LOCKS}/invoice-a%2F..%2Fb/")
    assert zk.exists(saw["node"]) is not None
    views.GATE.go.set()
    assert first.get(timeout=WAIT).status_code == 200


def test_dots_alone_are_quoted_too(zk_settings: dict[str, Any]) -> None:
    @zk_lock("{name}")
    def job(name: str) -> str:
        return current_lock().path

    assert job("..") == f"{LOCKS}/%2E%2E"
    assert job("a.b") == f"{LOCKS}/a.b"


def test_unknown_template_field_fails_when_decorating() -> None:
    def view(request: HttpRequest, pk: int) -> HttpResponse:
        raise AssertionError("never called")

    with pytest.raises(ConfigurationError) as caught:
        zk_lock("invoice-{pkk}")(view)
    message = str(caught.value)
    assert "{pkk}" in message
    assert "request, pk" in message
    with pytest.raises(ConfigurationError, match=r"name a parameter"):
        zk_lock("invoice-{}")(view)


def test_functions_taking_kwargs_are_checked_when_called(zk_settings: dict[str, Any]) -> None:
    @zk_lock("job-{kind}")
    def job(**options: Any) -> str:
        return current_lock().path

    assert job(kind="nightly") == f"{LOCKS}/job-nightly"
    with pytest.raises(ConfigurationError, match=r"job-\{kind\}"):
        job(other=1)


def test_decorated_views_note_their_alias_for_the_system_checks() -> None:
    places = _settings.uses()["default"]
    assert f"{views.__name__}.invoice" in places
    assert f"{views.__name__}.async_wait" in places


# -- on_busy --------------------------------------------------------------------------


def test_on_busy_callable_answers_for_the_view(
    zk_settings: dict[str, Any], zk_client_factory: ClientFactory, client: Client
) -> None:
    holder = hold_elsewhere(zk_client_factory, "custom-busy")
    answer = client.get("/locked/custom/")
    assert (answer.status_code, answer.content) == (503, b"come back later")
    holder.release()
    assert client.get("/locked/custom/").status_code == 200


def test_plain_function_raises_lock_timeout_naming_the_lock(
    zk_settings: dict[str, Any], zk_client_factory: ClientFactory
) -> None:
    ran = []

    @zk_lock("nightly-{day}")
    def nightly(day: str) -> None:
        ran.append(day)

    holder = hold_elsewhere(zk_client_factory, "nightly-mon")
    with pytest.raises(LockTimeout, match=r"nightly-mon"):
        nightly("mon")
    nightly("tue")
    assert ran == ["tue"]
    holder.release()


def test_the_lock_is_released_when_the_function_raises(zk: ZkClient) -> None:
    @zk_lock("failing")
    def failing() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        failing()
    assert wait_for_children(zk, f"{LOCKS}/failing", 0) == []
    with pytest.raises(KeyError):
        failing()  # free again, not 423/LockTimeout


# -- fencing token and current_lock() -------------------------------------------------


def test_view_sees_its_lock_and_the_fencing_token_is_the_nodes_czxid(
    zk: ZkClient,
) -> None:
    first = _get_in_threads("/locked/invoice/42/?hold=1", 1)
    assert views.GATE.entered.wait(WAIT)
    (saw,) = views.GATE.seen
    stat = zk.exists(saw["node"])
    assert stat is not None
    assert saw["token"] == saw["current_token"] == stat.czxid
    assert saw["same"]
    views.GATE.go.set()
    answer = first.get(timeout=WAIT)
    assert json.loads(answer.content)["token"] == stat.czxid


def test_current_lock_outside_any_lock_raises() -> None:
    with pytest.raises(RecipeUsageError, match=r"no lock is held"):
        current_lock()


def test_current_lock_is_the_innermost(zk_settings: dict[str, Any]) -> None:
    with locked("outer") as outer:
        assert current_lock() is outer
        with locked("inner") as inner:
            assert current_lock() is inner
            assert inner.fencing_token > outer.fencing_token
        assert current_lock() is outer
    with pytest.raises(RecipeUsageError):
        current_lock()


def test_current_lock_is_per_task(zk_settings: dict[str, Any]) -> None:
    async def main() -> None:
        inside = asyncio.Event()
        done = asyncio.Event()

        async def holder() -> None:
            async with locked("per-task") as lock:
                assert current_lock() is lock
                assert await asyncio.to_thread(current_lock) is lock  # the context goes along
                inside.set()
                await done.wait()

        task = asyncio.ensure_future(holder())
        await inside.wait()
        with pytest.raises(RecipeUsageError):
            current_lock()
        done.set()
        await task

    asyncio.run(main())


# -- locked() -------------------------------------------------------------------------


def test_locked_holds_and_releases(zk: ZkClient) -> None:
    with locked("report") as lock:
        assert lock.is_held()
        lock.check()
        stat = zk.exists(lock.node)  # type: ignore[arg-type]
        assert stat is not None
        assert lock.fencing_token == stat.czxid
    assert not lock.is_held()
    assert wait_for_children(zk, f"{LOCKS}/report", 0) == []


def test_locked_raises_lock_timeout_when_held_elsewhere(
    zk_settings: dict[str, Any], zk_client_factory: ClientFactory
) -> None:
    holder = hold_elsewhere(zk_client_factory, "report")
    with pytest.raises(LockTimeout, match=r"report"), locked("report", timeout=0):
        raise AssertionError("never entered")
    with pytest.raises(LockTimeout, match=r"within 0.2s"), locked("report", timeout=0.2):
        raise AssertionError("never entered")
    holder.release()


def test_locked_is_one_block(zk_settings: dict[str, Any]) -> None:
    block = locked("once")
    with block:
        pass
    with pytest.raises(RecipeUsageError, match=r"one block"), block:
        raise AssertionError("never entered")


def test_async_locked_holds_and_releases(zk: ZkClient, zk_client_factory: ClientFactory) -> None:
    async def main() -> None:
        async with locked("async-report") as lock:
            assert current_lock() is lock
            stat = await asyncio.to_thread(zk.exists, lock.node)  # type: ignore[arg-type]
            assert stat is not None
            assert lock.fencing_token == stat.czxid
        assert not lock.is_held()

    asyncio.run(main())
    assert wait_for_children(zk, f"{LOCKS}/async-report", 0) == []
    holder = hold_elsewhere(zk_client_factory, "async-report")

    async def refused() -> None:
        async with locked("async-report", timeout=0):
            raise AssertionError("never entered")

    with pytest.raises(LockTimeout, match=r"async-report"):
        asyncio.run(refused())
    holder.release()


def test_cancelled_async_locked_leaves_no_node_behind(
    zk: ZkClient, zk_client_factory: ClientFactory
) -> None:
    holder = hold_elsewhere(zk_client_factory, "async-report")
    directory = f"{LOCKS}/async-report"

    async def main() -> None:
        async def wait_for_it() -> None:
            async with locked("async-report"):
                raise AssertionError("never entered")

        waiter = asyncio.ensure_future(wait_for_it())
        await asyncio.to_thread(wait_for_children, zk, directory, 2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    assert zk.get_children(directory) == [holder.node.rsplit("/", 1)[1]]  # type: ignore[union-attr]
    holder.release()


# -- class-based views ----------------------------------------------------------------


def test_class_based_view_with_method_decorator(zk: ZkClient, client: Client) -> None:
    first = _get_in_threads("/locked/report/5/?hold=1", 1)
    assert views.GATE.entered.wait(WAIT)
    assert client.get("/locked/report/5/").status_code == 423
    assert client.get("/locked/report/6/").status_code == 200
    views.GATE.go.set()
    assert first.get(timeout=WAIT).status_code == 200
    assert [saw["path"] for saw in views.GATE.seen] == [
        f"{LOCKS}/report-5",
        f"{LOCKS}/report-6",
    ]


# -- loss -----------------------------------------------------------------------------


def test_a_lock_lost_while_the_function_ran_is_logged(
    zk: ZkClient, caplog: pytest.LogCaptureFixture
) -> None:
    @zk_lock("doomed")
    def doomed() -> bool:
        lock = current_lock()
        assert isinstance(lock, Lock)  # sync code holds a sync Lock
        expire_session(zk)
        return lock.lost.wait(WAIT)

    with caplog.at_level(logging.WARNING, logger="zk_recipes.django"):
        assert doomed()
    (record,) = [r for r in caplog.records if r.name == "zk_recipes.django"]
    assert "was lost" in record.getMessage()
    assert "doomed" in record.getMessage()
