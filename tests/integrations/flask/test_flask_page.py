"""Every example of docs/integrations/flask.md runs here, against real ZooKeeper.

The page includes its code from example_projects/flask_app/pages/flask_page.py
(one section per example), so what a reader copies is what runs here. Each
test builds the app the way the page does (``create_app(test_config)``, or
the section's own app), adds the section's views and asserts on what they
answer. Where a request must be inside its lock while the test acts, the
shop's work stops at the stand-ins' ``pause`` until the test lets it go;
other holders are real locks of the test's own client. Waits are on events
and watches.
"""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from flask import Flask, url_for

from zk_recipes import (
    ConnectionState,
    Lock,
    LockTimeout,
    RetryNTimes,
    Semaphore,
    ServiceDiscovery,
    ZkClient,
)
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import StateRecorder, ZooKeeperServer, expire_session, wait_for_children
from zk_recipes_flask import ZkRecipes
from zk_recipes_flask.gunicorn import worker_exit

PAGES = Path(__file__).resolve().parents[3] / "example_projects" / "flask_app" / "pages"
#: The tests' apps: a short session, as in conftest.py.
SESSION_TIMEOUT = 3.0
#: The longest a test waits for an event: only turns a hang into a failure.
WAIT = 10.0
BUSY_BODY = b"Locked: busy, try again shortly.\n"

AppMaker = Callable[..., Flask]


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The page's module, with fresh stand-ins (mail sent, runs counted) for this test."""
    monkeypatch.syspath_prepend(str(PAGES))
    module = importlib.import_module("flask_page")
    stand_ins = importlib.import_module("_shop_stand_ins")
    reports = stand_ins.Reports()
    fresh = {
        "mailer": stand_ins.Mailer(),
        "export_orders": stand_ins.Counter(),
        "rebuild_search_index": stand_ins.Counter(),
        "refresh_exchange_rates": stand_ins.Counter(),
        "ledger": stand_ins.Ledger(),
        "build_report": reports.build,
        "cached_report": reports.cached,
    }
    for name, value in fresh.items():
        monkeypatch.setattr(module, name, value)
    return module


@pytest.fixture
def make_shop(page: ModuleType, zk_hosts: str, zk_namespace: str) -> Iterator[AppMaker]:
    """``make(**config)``: the page's ``create_app`` on this test's server; closed afterwards."""
    made: list[Flask] = []

    def make(**config: Any) -> Flask:
        app: Flask = page.create_app(
            {
                "ZK_RECIPES_HOSTS": zk_hosts,
                "ZK_RECIPES_NAMESPACE": zk_namespace,
                "ZK_RECIPES_SESSION_TIMEOUT": SESSION_TIMEOUT,
                **config,
            }
        )
        made.append(app)
        return app

    yield make
    for app in made:
        page.zk.close(app)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """Threads for the requests that wait inside (or for) a lock while the test acts."""
    with ThreadPoolExecutor(4) as executor:
        yield executor


# -- The extension -----------------------------------------------------------------------


def test_the_factory_reads_its_settings_and_connects_nothing(
    page: ModuleType, make_shop: AppMaker, zk_namespace: str
) -> None:
    app = page.create_app()
    config = page.zk.config(app)
    assert (config.client.hosts, config.client.namespace) == ("zk1:2181,zk2:2181,zk3:2181", "/shop")
    assert page.zk.state(app).process_client.current() is None, "init_app connects nothing"

    tested = make_shop()
    assert tested.extensions["zk_recipes"] is page.zk.state(tested)
    with tested.app_context():
        client: ZkClient = page.zk.client
        assert client.namespace == zk_namespace
        assert client.exists("/") is not None


def test_constructor_options_are_defaults_that_the_apps_config_beats(
    page: ModuleType, zk_hosts: str, zk_namespace: str
) -> None:
    zk: ZkRecipes = page.shared_defaults()
    apps = [Flask("defaults"), Flask("own_timeout")]
    for app in apps:
        app.config.update(ZK_RECIPES_HOSTS=zk_hosts, ZK_RECIPES_NAMESPACE=zk_namespace)
    apps[1].config["ZK_RECIPES_SESSION_TIMEOUT"] = "4"  # as os.environ gives it
    try:
        for app in apps:
            zk.init_app(app)
        client = zk.get_client(apps[0])
        assert client.settings.session_timeout == 6.0
        assert client.negotiated_session_timeout == 6.0
        retry = client.settings.retry_policy
        assert isinstance(retry, RetryNTimes)
        assert (retry.n, retry.sleep) == (3, 0.5)
        own = zk.config(apps[1]).client
        assert own.session_timeout == 4.0
        assert own.retry_policy == retry, "the app's config sets the timeout, not the retry"
    finally:
        for app in apps:
            zk.close(app)


def test_the_client_view_shares_the_semaphores_three_leases(
    page: ModuleType, make_shop: AppMaker, zk_client: ZkClient, pool: ThreadPoolExecutor
) -> None:
    app = make_shop()
    page.add_exports(app)
    assert app.test_client().post("/exports").get_data() == b"exported"
    assert page.export_orders.runs == 1

    others = Semaphore(zk_client, "/exports", max_leases=3).acquire_leases(3, timeout=WAIT)
    assert len(others) == 3
    try:
        waiting = pool.submit(app.test_client().post, "/exports")
        wait_for_children(zk_client, "/exports/leases", 4)  # the request's lease waits
        assert page.export_orders.runs == 1
        others.pop().close()
        answer = waiting.result(WAIT)
        assert (answer.status_code, answer.get_data()) == (200, b"exported")
        assert page.export_orders.runs == 2
    finally:
        for lease in others:
            lease.close()


# -- Locked views and code ----------------------------------------------------------------


@pytest.fixture
def invoices(
    page: ModuleType, monkeypatch: pytest.MonkeyPatch, zk_hosts: str, zk_namespace: str
) -> Iterator[tuple[Flask, ZkRecipes, Callable[[], None]]]:
    """The locked-views section's own app, configured from FLASK_ZK_RECIPES_* as it says."""
    monkeypatch.setenv("FLASK_ZK_RECIPES_HOSTS", zk_hosts)
    monkeypatch.setenv("FLASK_ZK_RECIPES_NAMESPACE", zk_namespace)
    monkeypatch.setenv("FLASK_ZK_RECIPES_SESSION_TIMEOUT", str(SESSION_TIMEOUT))
    app, zk, rebuild_index = page.locked_views()
    yield app, zk, rebuild_index
    zk.close(app)


def test_a_locked_view_answers_423_to_a_second_request_while_the_first_holds(
    page: ModuleType,
    invoices: tuple[Flask, ZkRecipes, Callable[[], None]],
    pool: ThreadPoolExecutor,
) -> None:
    app, _, _ = invoices
    with page.pause.armed() as inside:
        first = pool.submit(app.test_client().post, "/invoices/7/send")
        assert inside.wait(WAIT)
        second = app.test_client().post("/invoices/7/send")
        assert (second.status_code, second.get_data()) == (423, BUSY_BODY)
    answer = first.result(WAIT)
    assert (answer.status_code, answer.get_data()) == (200, b"invoice 7 sent")
    assert app.test_client().post("/invoices/8/send").status_code == 200
    assert page.mailer.sent == ["invoice 7", "invoice 8"]


def test_a_locked_function_waits_for_the_previous_holder(
    page: ModuleType,
    invoices: tuple[Flask, ZkRecipes, Callable[[], None]],
    zk_client: ZkClient,
    pool: ThreadPoolExecutor,
) -> None:
    app, _, rebuild_index = invoices

    def rebuild() -> None:
        with app.app_context():
            rebuild_index()

    previous = Lock(zk_client, lock_path("rebuild-index"))
    with previous.acquired(timeout=WAIT):
        rebuilding = pool.submit(rebuild)
        wait_for_children(zk_client, lock_path("rebuild-index"), 2)  # it waits its turn
        assert page.rebuild_search_index.runs == 0
    rebuilding.result(WAIT)
    assert page.rebuild_search_index.runs == 1


def test_on_busy_answers_from_the_callable_and_the_error_handler(
    page: ModuleType, make_shop: AppMaker, zk_client: ZkClient
) -> None:
    app = make_shop()
    page.add_busy_answers(app)

    @app.post("/invoices/<int:id>/remind")
    @page.zk.locked("invoice-{id}")  # on_busy: 423, which the page's errorhandler renders
    def remind(id: int) -> str:
        return "reminded"

    with Lock(zk_client, lock_path("invoice-7")).acquired(timeout=WAIT):
        sent = app.test_client().post("/invoices/7/send")
        assert sent.status_code == 409
        assert "Invoice 7 is being sent right now" in sent.get_data(as_text=True)
        reminded = app.test_client().post("/invoices/7/remind")
        assert reminded.status_code == 423
        assert reminded.get_json() == {"error": "busy, try again shortly"}
        assert app.test_client().post("/invoices/8/remind").status_code == 200
    assert app.test_client().post("/invoices/7/send").get_data() == b"invoice 7 sent"
    assert page.mailer.sent == ["invoice 7"]


def test_on_unavailable_answers_with_the_cached_report(
    page: ModuleType, make_shop: AppMaker, zk_server: ZooKeeperServer
) -> None:
    with zk_server.proxy() as proxy:
        app = make_shop(ZK_RECIPES_HOSTS=proxy.connect_string)
        page.add_reports(app)
        built = app.test_client().get("/reports/7")
        assert (built.status_code, built.get_data()) == (200, b"report 7, built #1")

        client = page.zk.get_client(app)
        states = StateRecorder()
        client.add_listener(states)
        proxy.cut()  # ZooKeeper cannot be reached
        states.wait_for(ConnectionState.SUSPENDED)
        cached = app.test_client().get("/reports/7")
        assert (cached.status_code, cached.get_data()) == (200, b"report 7, built #1")

        proxy.heal()
        assert client.wait_connected(WAIT)
        rebuilt = app.test_client().get("/reports/7")
        assert (rebuilt.status_code, rebuilt.get_data()) == (200, b"report 7, built #2")


def test_a_class_based_view_takes_its_lock_from_the_url(
    page: ModuleType, make_shop: AppMaker, zk_client: ZkClient
) -> None:
    app = make_shop()
    page.add_report_view(app)
    assert app.test_client().get("/reports/7").status_code == 200
    with Lock(zk_client, lock_path("report-7")).acquired(timeout=WAIT):
        busy = app.test_client().get("/reports/7")
        assert (busy.status_code, busy.get_data()) == (423, BUSY_BODY)
        assert app.test_client().get("/reports/8").status_code == 200


def test_the_lock_blocks_hold_their_lock_and_pass_the_token(
    page: ModuleType, make_shop: AppMaker, zk_client: ZkClient
) -> None:
    app = make_shop()
    with app.app_context():
        page.close_month("2024-05")
        first = page.ledger.closed["2024-05"]
        page.close_month("2024-05")  # closed again: a new hold, a newer token
        assert page.ledger.closed["2024-05"] > first > 0

        asyncio.run(page.refresh_rates())
        assert page.refresh_exchange_rates.runs == 1
        with (
            Lock(zk_client, lock_path("refresh-rates")).acquired(timeout=WAIT),
            pytest.raises(LockTimeout, match="refresh-rates"),
        ):
            asyncio.run(page.refresh_rates())  # timeout=0: no wait
        assert page.refresh_exchange_rates.runs == 1


def test_the_fencing_token_makes_the_store_refuse_an_overtaken_writer(
    page: ModuleType,
    make_shop: AppMaker,
    zk_client: ZkClient,
    tmp_path: Path,
    pool: ThreadPoolExecutor,
) -> None:
    database = tmp_path / "shop.db"
    app = make_shop(DATABASE=str(database))
    importlib.import_module("_shop_stand_ins").init_db(app)
    page.add_fenced_send(app)

    def invoice(id: int) -> tuple[str, int]:
        with sqlite3.connect(database) as db:
            status, fence = db.execute(
                "SELECT status, fence FROM invoice WHERE id = ?", (id,)
            ).fetchone()
        return status, fence

    with sqlite3.connect(database) as db:
        db.executemany("INSERT INTO invoice (id, status) VALUES (?, 'draft')", [(7,), (8,)])

    sent = app.test_client().post("/invoices/8/send")
    assert (sent.status_code, sent.get_data()) == (200, b"invoice 8 sent")
    status, fence = invoice(8)
    assert status == "sent"
    assert fence > 0

    with page.pause.armed() as inside:
        overtaken = pool.submit(app.test_client().post, "/invoices/7/send")
        assert inside.wait(WAIT)  # it holds the lock, its token taken, rendering the PDF
        expire_session(page.zk.get_client(app))  # a long GC pause: its lock node is gone
        with Lock(zk_client, lock_path("invoice-7")).acquired(timeout=WAIT) as newer:
            token = newer.fencing_token
            with sqlite3.connect(database) as db:  # the newer holder writes first
                db.execute(
                    "UPDATE invoice SET fence = ?, status = 'sent by the newer holder' "
                    "WHERE id = ? AND fence < ?",
                    (token, 7, token),
                )
    answer = overtaken.result(WAIT)
    assert (answer.status_code, answer.get_data()) == (409, b"overtaken by a newer holder")
    assert invoice(7) == ("sent by the newer holder", token)
    assert page.mailer.sent == ["invoice 8"]


# -- The status blueprint -----------------------------------------------------------------


def test_the_status_blueprint_answers_under_zk(page: ModuleType, make_shop: AppMaker) -> None:
    app = make_shop()
    page.add_status(app)
    page.zk.get_client(app)  # connected: the first probe would say CONNECTING
    health = app.test_client().get("/zk/health")
    assert health.status_code == 200
    assert health.get_json()["connected"] is True
    assert app.test_client().get("/zk/").status_code == 200
    with app.test_request_context():
        assert url_for("zk_recipes_status.health") == "/zk/health"


def test_staff_only_hides_the_page_but_not_the_health_check(
    page: ModuleType, make_shop: AppMaker
) -> None:
    app = make_shop()
    page.add_guarded_status(app)
    page.zk.get_client(app)
    client = app.test_client()
    assert client.get("/zk/").status_code == 404
    assert client.get("/zk/", auth=("bob", "secret")).status_code == 404
    assert client.get("/zk/", auth=("ada", "secret")).status_code == 200
    assert client.get("/zk/health").status_code == 200


# -- Service discovery and deployment -------------------------------------------------------


def test_the_service_is_announced_and_worker_exit_withdraws_it(
    page: ModuleType, zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    app, zk = page.announced_app(
        {"ZK_RECIPES_HOSTS": zk_hosts, "ZK_RECIPES_NAMESPACE": zk_namespace}
    )
    try:
        assert zk.announce(app).registered.wait(WAIT)
        (instance,) = ServiceDiscovery(zk_client).query_for_instances("shop")
        assert instance.port == 5000
        assert len(zk_client.get_children("/services/shop")) == 1
        client = zk.get_client(app)

        worker_exit(server=None, worker=None)  # the gunicorn hook the page takes
        assert ServiceDiscovery(zk_client).query_for_instances("shop") == []
        assert client.is_closed
        assert zk.state(app).process_client.current() is None
    finally:
        zk.close(app)


def test_the_metrics_view_serves_the_client_gauges(page: ModuleType, make_shop: AppMaker) -> None:
    from zk_recipes import metrics

    before = metrics.registry()
    metrics.enable()
    try:
        app = make_shop()
        page.add_metrics(app)
        with app.app_context():
            page.zk.client  # noqa: B018 (connect: the client gauges count it)
        answer = app.test_client().get("/metrics")
        assert answer.status_code == 200
        assert answer.mimetype == "text/plain"
        assert b"zk_recipes_" in answer.data
    finally:
        if before is None:
            metrics.disable()
        else:
            metrics.enable(before)
