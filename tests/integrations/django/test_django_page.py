"""docs/integrations/django.md's examples, as the page shows them, on real ZooKeeper.

The page includes its code from example_projects/django_site/pages/ (and, for
what needs models, Celery or a server, from the example shop, which
test_examples.py runs); every function, view and setting there is used here.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.test import Client, RequestFactory
from django.urls import path

import zk_recipes_django
from zk_recipes import Lock, LockLost, ServiceDiscovery, ZkClient
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import expire_session, free_ports, wait_until

PAGES = Path(__file__).resolve().parents[3] / "example_projects" / "django_site" / "pages"
sys.path.insert(0, str(PAGES))
page: Any = importlib.import_module("django_page")
shop: Any = importlib.import_module("_shop")
settings_page: Any = importlib.import_module("django_settings_page")

#: The test's own URLs for the admin site of the page (ROOT_URLCONF is this module).
urlpatterns = [path("operations/", settings_page.my_site.urls)]

requests = RequestFactory()


def _held_elsewhere(zk_client: ZkClient, name: str) -> Lock:
    lock = Lock(zk_client, lock_path(name, zk_recipes_django.config().prefix))
    assert lock.acquire(timeout=10)
    return lock


def test_get_client_serves_any_recipe(zk_settings: dict[str, Any], zk_client: ZkClient) -> None:
    page.start_export()
    assert shop.exports_run
    assert zk_client.exists("/exports") is not None  # the semaphore's directory


def test_a_locked_view_runs_and_a_second_sender_is_told_busy(
    zk_settings: dict[str, Any], zk_client: ZkClient
) -> None:
    response = page.send_invoice(requests.post("/invoices/7/send"), pk=7)
    assert (response.status_code, shop.sent[-1]) == (200, 7)
    assert shop.audit_log.entries[-1][0] == "invoice 7 sent"  # written under the view's lock

    held = _held_elsewhere(zk_client, "invoice-7")
    try:
        assert page.send_invoice(requests.post("/invoices/7/send"), pk=7).status_code == 423
        busy = page.remind(requests.post("/invoices/7/remind"), pk=7)  # on_busy=come_back_later
        assert busy.status_code == 409
        assert b"try again shortly" in busy.content
        assert page.remind(requests.post("/invoices/8/remind"), pk=8).status_code == 200
    finally:
        held.release()
    assert page.remind(requests.post("/invoices/7/remind"), pk=7).status_code == 200


def test_a_function_waits_for_its_lock(zk_settings: dict[str, Any]) -> None:
    before = len(shop.reports_built)
    page.rebuild_index()
    assert len(shop.reports_built) == before + 1


def test_the_cached_report_answers_while_zookeeper_is_unreachable(settings: Any) -> None:
    (port,) = free_ports(1)
    settings.ZK_RECIPES = {"default": {"HOSTS": f"127.0.0.1:{port}", "CONNECTION_TIMEOUT": 2.0}}
    try:
        response = page.report(requests.get("/reports/3"), pk=3)
        assert (response.status_code, response.content) == (200, b"report 3 (cached)")
    finally:
        zk_recipes_django.close_all()


def test_the_class_based_view_locks_its_dispatch(
    zk_settings: dict[str, Any], zk_client: ZkClient
) -> None:
    view = page.ReportView.as_view()
    assert view(requests.get("/reports/3"), pk=3).status_code == 200
    held = _held_elsewhere(zk_client, "report-3")
    try:
        assert view(requests.get("/reports/3"), pk=3).status_code == 423
    finally:
        held.release()


def test_locked_blocks_fence_their_writes(zk_settings: dict[str, Any]) -> None:
    page.close_month("2026-10")
    page.close_month("2026-11")
    (first, t1), (second, t2) = shop.ledger.entries[-2:]
    assert (first, second) == (("closed", "2026-10"), ("closed", "2026-11"))
    assert 0 < t1 < t2  # each hold a newer token

    asyncio.run(page.refresh_rates())
    assert shop.rates_refreshed


def test_current_lock_refuses_once_the_session_is_gone(zk_settings: dict[str, Any]) -> None:
    with zk_recipes_django.locked("audit"):
        page.write_audit("before")
        expire_session(zk_recipes_django.get_client())
        wait_until(zk_recipes_django.current_lock().lost.is_set, "the lock lost")
        with pytest.raises(LockLost):
            page.write_audit("after")
    assert [entry for entry, _ in shop.audit_log.entries][-1] == "before"


def test_the_metrics_view_serves_prometheus_text(zk_settings: dict[str, Any]) -> None:
    response = page.metrics_view(requests.get("/metrics"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")


def test_moving_from_kazoo_keeps_the_lock_path(
    settings: Any, zk_settings: dict[str, Any], zk_hosts: str, zk_namespace: str
) -> None:
    settings.ZK_HOSTS = zk_hosts + zk_namespace  # kazoo takes the namespace as a chroot
    before = len(shop.reports_built)
    kazoo = page.with_kazoo()
    try:
        page.with_zk_recipes()
    finally:
        kazoo.stop()
        kazoo.close()
    assert len(shop.reports_built) == before + 2


def test_the_settings_pass_the_checks_and_connect(
    settings: Any, zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    aliases = settings_page.two_aliases()
    settings.ZK_RECIPES = aliases
    assert [m for m in checks.run_checks(tags=["zk_recipes"]) if m.is_serious()] == []
    assert zk_recipes_django.config("payments").client.auth

    aliases["default"].update(HOSTS=zk_hosts, NAMESPACE=zk_namespace)
    settings.ZK_RECIPES = {"default": aliases["default"]}
    try:
        with zk_recipes_django.locked("report") as lock:
            assert lock.path == "/zk-recipes/locks/report"  # the PREFIX, in the NAMESPACE
            assert len(zk_client.get_children(lock.path)) == 1
    finally:
        zk_recipes_django.close_all()


def test_the_service_setting_registers_the_process(
    settings: Any, zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    service = settings_page.service()
    settings.ZK_RECIPES = service
    assert [m for m in checks.run_checks(tags=["zk_recipes"]) if m.is_serious()] == []

    service["default"].update(HOSTS=zk_hosts, NAMESPACE=zk_namespace)
    settings.ZK_RECIPES = service
    try:
        zk_recipes_django.announce()
        discovery = ServiceDiscovery(zk_client)
        wait_until(lambda: discovery.query_for_instances("shop"), "the instance registered")
        (instance,) = discovery.query_for_instances("shop")
        assert instance.port == 8000
        assert instance.build_uri() == f"http://{instance.address}:8000"
    finally:
        zk_recipes_django.close_all()
    assert discovery.query_for_instances("shop") == []


@pytest.mark.django_db
def test_the_status_page_on_an_admin_site_of_your_own(
    settings: Any, zk_settings: dict[str, Any], client: Client, django_user_model: Any
) -> None:
    settings.ROOT_URLCONF = __name__
    user = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    client.force_login(user)
    index = client.get("/operations/").content.decode()
    assert "ZooKeeper" in index
    response = client.get("/operations/zk_recipes/status/")
    assert response.status_code == 200
    assert "default" in response.content.decode()


def test_the_asgi_application_answers_the_lifespan(zk_settings: dict[str, Any]) -> None:
    app = settings_page.application
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(dict(message))

    async def lifespan() -> None:
        task = asyncio.create_task(app({"type": "lifespan"}, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        await inbox.put({"type": "lifespan.shutdown"})
        await task

    asyncio.run(lifespan())
    assert sent == [
        {"type": "lifespan.startup.complete"},
        {"type": "lifespan.shutdown.complete"},
    ]
