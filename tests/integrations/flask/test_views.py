"""``@zk.locked``, ``zk.lock()`` and ``current_lock()`` on real ZooKeeper, through Flask apps.

The views are made per test on an app of this test's namespace (``shop``);
with ``?hold=1`` they wait inside the lock until the test sets the gate's go,
so the tests count who is inside at once and look at the lock's nodes while
it is held. Requests come from threads, each through its own test client.
Waits are on events and watches; the deadlines only turn a hang into a
failure.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from flask import Flask, g, request
from flask.views import MethodView
from werkzeug.exceptions import HTTPException
from werkzeug.test import TestResponse

import zk_recipes_flask
from tests.integrations._views import LOCKS, WAIT, hold_elsewhere
from tests.integrations.flask.conftest import AppFactory
from zk_recipes import (
    ConfigurationError,
    Lock,
    LockTimeout,
    RecipeUsageError,
    ZkClient,
)
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import expire_session, wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory
from zk_recipes_flask import LockBusy, ZkRecipes, current_lock

THREADS = 4
#: The longest a held view waits for the test's go: a failed test never hangs on it.
HOLD_SECONDS = 30.0
BUSY_BODY = b"Locked: busy, try again shortly.\n"


class Gate:
    """Who is inside the locked views: how many now, the most at once, what they saw.

    Sync and async views share it: an async view runs on an event loop of
    its own (asgiref), so it waits for the go on a thread (``to_thread``).
    """

    def __init__(self, zk: ZkRecipes) -> None:
        self._zk = zk
        self._mutex = threading.Lock()
        self.inside = 0
        self.most = 0
        self.entries = 0
        self.seen: list[dict[str, Any]] = []
        #: Set by each request that gets in.
        self.entered = threading.Event()
        #: Set by the test: held requests go on.
        self.go = threading.Event()

    def enter(self) -> dict[str, Any]:
        lock: Lock = g.zk_lock
        now = current_lock()
        saw = {
            "token": lock.fencing_token,
            "current_token": now.fencing_token,
            "same": now is lock and self._zk.current_lock() is lock,
            "node": lock.node,
            "path": lock.path,
        }
        with self._mutex:
            self.inside += 1
            self.most = max(self.most, self.inside)
            self.entries += 1
            self.seen.append(saw)
        self.entered.set()
        return saw

    def leave(self) -> None:
        with self._mutex:
            self.inside -= 1

    def inside_sync(self) -> dict[str, Any]:
        saw = self.enter()
        try:
            if request.args.get("hold") == "1":
                self.go.wait(HOLD_SECONDS)
            return saw
        finally:
            self.leave()

    async def inside_async(self) -> dict[str, Any]:
        saw = self.enter()
        try:
            if request.args.get("hold") == "1":
                await asyncio.to_thread(self.go.wait, HOLD_SECONDS)
            return saw
        finally:
            self.leave()


class Shop:
    """A test's app, its extension, its gate and its process client."""

    def __init__(self, app: Flask, zk: ZkRecipes, gate: Gate) -> None:
        self.app = app
        self.zk = zk
        self.gate = gate

    @property
    def client(self) -> ZkClient:
        return self.zk.get_client(self.app)


def add_views(app: Flask, zk: ZkRecipes, gate: Gate) -> None:
    """The locked views the tests call."""

    @app.get("/sync/busy")
    @zk.locked("sync-gate")
    def sync_busy() -> dict[str, Any]:
        return gate.inside_sync()

    @app.get("/sync/wait")
    @zk.locked("sync-gate", timeout=HOLD_SECONDS)
    def sync_wait() -> dict[str, Any]:
        return gate.inside_sync()

    @app.get("/async/busy")
    @zk.locked("async-gate")
    async def async_busy() -> dict[str, Any]:
        return await gate.inside_async()

    @app.get("/async/wait")
    @zk.locked("async-gate", timeout=HOLD_SECONDS)
    async def async_wait() -> dict[str, Any]:
        return await gate.inside_async()

    @app.get("/invoice/<id>")
    @zk.locked("invoice-{id}")
    def invoice(id: str) -> dict[str, Any]:
        return gate.inside_sync()

    @app.get("/files/<path:name>")
    @zk.locked("file-{name}")
    def file(name: str) -> dict[str, Any]:
        return gate.inside_sync()

    def come_back_later(**kwargs: Any) -> tuple[str, int]:
        return "come back later", 503

    @app.get("/custom")
    @zk.locked("custom-busy", on_busy=come_back_later)
    def custom() -> dict[str, Any]:
        return gate.inside_sync()

    async def conflict_later() -> tuple[str, int]:
        await asyncio.sleep(0)
        return "conflict", 409

    @app.get("/async/custom")
    @zk.locked("custom-busy", on_busy=conflict_later)
    async def async_custom() -> dict[str, Any]:
        return await gate.inside_async()

    @app.get("/conflict")
    @zk.locked("sync-gate", on_busy=409)
    def conflict() -> dict[str, Any]:
        return gate.inside_sync()

    class ReportView(MethodView):
        decorators: ClassVar[list[Callable[..., Any]]] = [zk.locked("report-{id}")]

        def get(self, id: int) -> dict[str, Any]:
            return gate.inside_sync()

    app.add_url_rule("/reports/<int:id>", view_func=ReportView.as_view("report"))

    @zk.locked("helper")
    def helper() -> str:
        return "done"

    @app.get("/calls-a-helper")
    def calls_a_helper() -> str:
        return helper()


@pytest.fixture
def shop(make_app: AppFactory) -> Iterator[Shop]:
    app, zk = make_app()
    gate = Gate(zk)
    add_views(app, zk, gate)
    yield Shop(app, zk, gate)
    gate.go.set()  # a failed test leaves no view waiting


def get_in_threads(app: Flask, url: str, count: int) -> queue.Queue[TestResponse]:
    """``count`` GETs of ``url`` at once, each from a thread with its own test client."""
    answers: queue.Queue[TestResponse] = queue.Queue()
    start = threading.Barrier(count)

    def one() -> None:
        client = app.test_client()
        start.wait(WAIT)
        answers.put(client.get(url))

    for _ in range(count):
        threading.Thread(target=one, daemon=True).start()
    return answers


# -- sync views, requests from threads ------------------------------------------------


def test_sync_view_lets_one_request_in_and_answers_423_to_the_others_at_once(
    shop: Shop,
) -> None:
    answers = get_in_threads(shop.app, "/sync/busy?hold=1", THREADS)
    refused = [answers.get(timeout=WAIT) for _ in range(THREADS - 1)]
    assert [r.status_code for r in refused] == [423] * (THREADS - 1)
    assert refused[0].content_type.startswith("text/plain")
    assert refused[0].data == BUSY_BODY  # says busy, names neither lock nor holder
    assert shop.gate.inside == 1
    shop.gate.go.set()
    assert answers.get(timeout=WAIT).status_code == 200
    assert (shop.gate.entries, shop.gate.most) == (1, 1)
    assert wait_for_children(shop.client, f"{LOCKS}/sync-gate", 0) == []


def test_sync_view_with_a_timeout_lets_every_request_in_one_after_another(
    shop: Shop,
) -> None:
    answers = get_in_threads(shop.app, "/sync/wait?hold=1", THREADS)
    assert shop.gate.entered.wait(WAIT)
    wait_for_children(shop.client, f"{LOCKS}/sync-gate", THREADS)  # all in line
    shop.gate.go.set()
    statuses = [answers.get(timeout=WAIT).status_code for _ in range(THREADS)]
    assert statuses == [200] * THREADS
    assert (shop.gate.entries, shop.gate.most) == (THREADS, 1)
    tokens = [saw["token"] for saw in shop.gate.seen]
    assert tokens == sorted(tokens)  # fencing tokens grow in the order of the holds
    assert len(set(tokens)) == THREADS


# -- async views (Flask runs each on an event loop of its own) -------------------------


def test_async_view_lets_one_request_in_and_answers_423_to_the_others(shop: Shop) -> None:
    answers = get_in_threads(shop.app, "/async/busy?hold=1", THREADS)
    refused = [answers.get(timeout=WAIT) for _ in range(THREADS - 1)]
    assert [r.status_code for r in refused] == [423] * (THREADS - 1)
    assert refused[0].data == BUSY_BODY
    assert shop.gate.inside == 1
    shop.gate.go.set()
    assert answers.get(timeout=WAIT).status_code == 200
    assert (shop.gate.entries, shop.gate.most) == (1, 1)
    assert wait_for_children(shop.client, f"{LOCKS}/async-gate", 0) == []


def test_async_view_with_a_timeout_lets_every_request_in_one_after_another(
    shop: Shop,
) -> None:
    answers = get_in_threads(shop.app, "/async/wait?hold=1", THREADS)
    assert shop.gate.entered.wait(WAIT)
    wait_for_children(shop.client, f"{LOCKS}/async-gate", THREADS)
    shop.gate.go.set()
    statuses = [answers.get(timeout=WAIT).status_code for _ in range(THREADS)]
    assert statuses == [200] * THREADS
    assert (shop.gate.entries, shop.gate.most) == (THREADS, 1)


def test_async_function_waits_without_blocking_its_event_loop(
    shop: Shop, zk_client_factory: ClientFactory
) -> None:
    @shop.zk.locked("nightly-{day}", timeout=HOLD_SECONDS)
    async def nightly(day: str) -> int:
        return current_lock().fencing_token

    holder = hold_elsewhere(zk_client_factory, "nightly-mon")
    held_token = holder.fencing_token
    directory = f"{LOCKS}/nightly-mon"

    async def main() -> int:
        job = asyncio.ensure_future(nightly("mon"))
        # The loop goes on while the job waits: it watches the queue and lets go.
        await asyncio.to_thread(wait_for_children, shop.client, directory, 2)
        assert not job.done()
        await asyncio.to_thread(holder.release)
        return await job

    with shop.app.app_context():
        token = asyncio.run(main())
    assert token > held_token


def test_async_on_busy_callable_is_awaited(shop: Shop, zk_client_factory: ClientFactory) -> None:
    holder = hold_elsewhere(zk_client_factory, "custom-busy")
    answer = shop.app.test_client().get("/async/custom")
    assert (answer.status_code, answer.data) == (409, b"conflict")
    holder.release()


# -- names ----------------------------------------------------------------------------


def test_template_over_url_variables_excludes_the_same_id_only(shop: Shop) -> None:
    first = get_in_threads(shop.app, "/invoice/7?hold=1", 1)
    assert shop.gate.entered.wait(WAIT)
    client = shop.app.test_client()
    assert client.get("/invoice/8").status_code == 200
    assert client.get("/invoice/7").status_code == 423
    assert shop.client.get_children(f"{LOCKS}/invoice-7") != []
    shop.gate.go.set()
    assert first.get(timeout=WAIT).status_code == 200
    assert [saw["path"] for saw in shop.gate.seen] == [
        f"{LOCKS}/invoice-7",
        f"{LOCKS}/invoice-8",
    ]


def test_class_based_view_with_decorators(shop: Shop) -> None:
    first = get_in_threads(shop.app, "/reports/5?hold=1", 1)
    assert shop.gate.entered.wait(WAIT)
    client = shop.app.test_client()
    assert client.get("/reports/5").status_code == 423
    assert client.get("/reports/6").status_code == 200
    shop.gate.go.set()
    assert first.get(timeout=WAIT).status_code == 200
    assert [saw["path"] for saw in shop.gate.seen] == [f"{LOCKS}/report-5", f"{LOCKS}/report-6"]


def test_a_slash_in_a_url_variable_stays_inside_the_lock_directory(shop: Shop) -> None:
    assert shop.app.test_client().get("/files/a/../b").status_code == 200
    (saw,) = shop.gate.seen
    assert saw["path"] == f"{LOCKS}/file-a%2F..%2Fb"
    assert saw["node"].startswith(f"{LOCKS}/file-a%2F..%2Fb/")


def test_unknown_template_field_fails_when_decorating(make_app: AppFactory) -> None:
    _, zk = make_app()

    def invoice(id: str) -> str:
        raise AssertionError("never called")

    with pytest.raises(ConfigurationError) as caught:
        zk.locked("invoice-{pk}")(invoice)
    assert "{pk}" in str(caught.value)
    assert "(id)" in str(caught.value)


def test_the_lock_is_the_one_of_the_command_line_under_the_apps_prefix(
    make_app: AppFactory,
) -> None:
    app, zk = make_app(ZK_RECIPES_PREFIX="/shop")

    @zk.locked("job-{kind}")
    def job(kind: str) -> str:
        return current_lock().path

    with app.app_context():
        assert job("nightly") == lock_path("job-nightly", "/shop") == "/shop/locks/job-nightly"
        with zk.lock("report") as lock:
            assert lock.path == lock_path("report", "/shop")


# -- when busy ------------------------------------------------------------------------


def test_on_busy_status_and_callable_answer_for_the_view(
    shop: Shop, zk_client_factory: ClientFactory
) -> None:
    client = shop.app.test_client()
    holder = hold_elsewhere(zk_client_factory, "sync-gate")
    answer = client.get("/conflict")
    assert (answer.status_code, answer.data) == (409, b"Conflict: busy, try again shortly.\n")
    holder.release()
    holder = hold_elsewhere(zk_client_factory, "custom-busy")
    answer = client.get("/custom")
    assert (answer.status_code, answer.data) == (503, b"come back later")
    holder.release()
    assert client.get("/custom").status_code == 200


def test_a_function_called_in_a_request_makes_the_request_423(
    shop: Shop, make_app: AppFactory, zk_client_factory: ClientFactory
) -> None:
    holder = hold_elsewhere(zk_client_factory, "helper")
    answer = shop.app.test_client().get("/calls-a-helper")
    assert (answer.status_code, answer.data) == (423, BUSY_BODY)

    app, zk = make_app(name="own_answer")
    add_views(app, zk, Gate(zk))

    @app.errorhandler(LockBusy)
    def busy(exc: LockBusy) -> tuple[str, int]:
        assert isinstance(exc, LockTimeout)
        assert "helper" in str(exc)  # the message names the lock, for logs
        return "the app's own answer", 423

    answer = app.test_client().get("/calls-a-helper")
    assert (answer.status_code, answer.data) == (423, b"the app's own answer")

    app, zk = make_app(name="by_code")
    add_views(app, zk, Gate(zk))

    @app.errorhandler(423)
    def locked(exc: HTTPException) -> tuple[str, int]:
        assert isinstance(exc, LockBusy)
        return "every 423 of the app", 423

    answer = app.test_client().get("/calls-a-helper")
    assert (answer.status_code, answer.data) == (423, b"every 423 of the app")
    holder.release()
    assert shop.app.test_client().get("/calls-a-helper").data == b"done"


def test_a_plain_function_outside_a_request_raises_lock_timeout(
    make_app: AppFactory, zk_client_factory: ClientFactory
) -> None:
    app, zk = make_app()
    ran = []

    @zk.locked("nightly-{day}")
    def nightly(day: str) -> None:
        ran.append(day)

    holder = hold_elsewhere(zk_client_factory, "nightly-mon")
    with app.app_context():
        with pytest.raises(LockTimeout, match=r"nightly-mon") as caught:
            nightly("mon")
        assert not isinstance(caught.value, LockBusy)
        nightly("tue")
    assert ran == ["tue"]
    holder.release()


def test_a_decorated_function_needs_an_app_context(make_app: AppFactory) -> None:
    _, zk = make_app()

    @zk.locked("anywhere")
    def job() -> None:
        raise AssertionError("never called")

    with pytest.raises(RecipeUsageError, match=r"app context"):
        job()


def test_the_lock_is_released_when_the_view_raises(shop: Shop) -> None:
    @shop.zk.locked("failing")
    def failing() -> None:
        raise KeyError("boom")

    with shop.app.app_context():
        with pytest.raises(KeyError):
            failing()
        assert wait_for_children(shop.client, f"{LOCKS}/failing", 0) == []
        with pytest.raises(KeyError):
            failing()  # free again, not LockTimeout
        assert "zk_lock" not in g


# -- the held lock: g.zk_lock, current_lock() ------------------------------------------


def test_view_sees_its_lock_and_the_fencing_token_is_the_nodes_czxid(shop: Shop) -> None:
    first = get_in_threads(shop.app, "/invoice/42?hold=1", 1)
    assert shop.gate.entered.wait(WAIT)
    (saw,) = shop.gate.seen
    stat = shop.client.exists(saw["node"])
    assert stat is not None
    assert saw["token"] == saw["current_token"] == stat.czxid
    assert saw["same"]  # g.zk_lock, current_lock() and zk.current_lock() alike
    shop.gate.go.set()
    answer = first.get(timeout=WAIT)
    assert answer.get_json()["token"] == stat.czxid


def test_async_view_sees_its_lock_too(shop: Shop) -> None:
    answer = shop.app.test_client().get("/async/busy")
    assert answer.status_code == 200
    saw = answer.get_json()
    assert saw["same"]
    assert saw["token"] == saw["current_token"] > 0


def test_current_lock_outside_any_lock_raises(make_app: AppFactory) -> None:
    _, zk = make_app()
    with pytest.raises(RecipeUsageError, match=r"no lock is held"):
        current_lock()
    with pytest.raises(RecipeUsageError, match=r"no lock is held"):
        zk.current_lock()
    assert zk_recipes_flask.current_lock is current_lock


def test_current_lock_is_the_innermost_and_per_task(make_app: AppFactory) -> None:
    app, zk = make_app()

    async def main() -> None:
        inside = asyncio.Event()
        done = asyncio.Event()

        async def holder() -> None:
            async with zk.lock("per-task") as lock:
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

    with app.app_context():
        with zk.lock("outer") as outer:
            assert current_lock() is outer
            with zk.lock("inner") as inner:
                assert current_lock() is inner
                assert inner.fencing_token > outer.fencing_token
            assert current_lock() is outer
        asyncio.run(main())


# -- zk.lock() ------------------------------------------------------------------------


def test_lock_holds_and_releases(shop: Shop) -> None:
    with shop.app.app_context(), shop.zk.lock("report") as lock:
        assert lock.is_held()
        lock.check()
        stat = shop.client.exists(lock.node)  # type: ignore[arg-type]
        assert stat is not None
        assert lock.fencing_token == stat.czxid
        assert lock.client is shop.client  # the app's process client, no session of its own
    assert not lock.is_held()
    assert wait_for_children(shop.client, f"{LOCKS}/report", 0) == []


def test_lock_raises_lock_timeout_when_held_by_another_client(
    make_app: AppFactory, zk_client_factory: ClientFactory
) -> None:
    app, zk = make_app()
    holder = hold_elsewhere(zk_client_factory, "report")
    with app.app_context():
        with pytest.raises(LockTimeout, match=r"report"), zk.lock("report", timeout=0):
            raise AssertionError("never entered")
        with pytest.raises(LockTimeout, match=r"within 0.2s"), zk.lock("report", timeout=0.2):
            raise AssertionError("never entered")
        holder.release()
        with zk.lock("report", timeout=0) as lock:
            assert lock.is_held()


def test_lock_is_one_block(make_app: AppFactory) -> None:
    app, zk = make_app()
    block = zk.lock("once")
    with app.app_context():
        with block:
            pass
        with pytest.raises(RecipeUsageError, match=r"one block"), block:
            raise AssertionError("never entered")


def test_async_lock_holds_and_a_cancelled_waiter_leaves_no_node(
    shop: Shop, zk_client_factory: ClientFactory
) -> None:
    directory = f"{LOCKS}/async-report"

    async def held() -> None:
        async with shop.zk.lock("async-report") as lock:
            assert current_lock() is lock
            stat = await asyncio.to_thread(shop.client.exists, lock.node)  # type: ignore[arg-type]
            assert stat is not None
            assert lock.fencing_token == stat.czxid
        assert not lock.is_held()

    async def cancelled() -> None:
        async def wait_for_it() -> None:
            async with shop.zk.lock("async-report"):
                raise AssertionError("never entered")

        waiter = asyncio.ensure_future(wait_for_it())
        await asyncio.to_thread(wait_for_children, shop.client, directory, 2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    with shop.app.app_context():
        asyncio.run(held())
        holder = hold_elsewhere(zk_client_factory, "async-report")
        asyncio.run(cancelled())
    assert shop.client.get_children(directory) == [holder.node.rsplit("/", 1)[1]]  # type: ignore[union-attr]
    holder.release()


# -- loss -----------------------------------------------------------------------------


def test_a_lock_lost_while_the_function_ran_is_logged(
    shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    @shop.zk.locked("doomed")
    def doomed() -> bool:
        lock = current_lock()
        assert isinstance(lock, Lock)  # sync code holds a sync Lock
        expire_session(shop.client)
        return lock.lost.wait(WAIT)

    with caplog.at_level(logging.WARNING, logger="zk_recipes.flask"), shop.app.app_context():
        assert doomed()
    (record,) = [r for r in caplog.records if r.name == "zk_recipes.flask"]
    assert "was lost" in record.getMessage()
    assert "doomed" in record.getMessage()
