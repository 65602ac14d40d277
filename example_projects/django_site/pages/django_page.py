"""The examples of docs/integrations/django.md, as the page shows them.

Importable under any Django settings that have ``zk_recipes_django`` (the
tests' site); tests/integrations/django/test_django_page.py calls every one
on real ZooKeeper. The shop's own code they call is stood in for by
``_shop.py``. The examples that need models, a Celery app or a server of
their own come from the example shop instead (example_projects/django_site).
"""
# Django is untyped here: its decorators return Any.
# mypy: disallow-untyped-decorators=False, disallow-subclassing-any=False

from __future__ import annotations

from _shop import (
    audit_log,
    build_report,
    cached_report,
    ledger,
    refresh,
    run_export,
    sent,
)
from kazoo.client import KazooClient


def start_export() -> None:
    # --8<-- [start:get_client]
    # given: run_export (your work)
    from zk_recipes import Semaphore
    from zk_recipes_django import get_client

    with Semaphore(get_client(), "/exports", max_leases=3):
        run_export()
    # --8<-- [end:get_client]


# --8<-- [start:zk_lock]
# given: sent (your record of sends), write_audit (below), build_report (your work)
from django.http import HttpRequest, HttpResponse

from zk_recipes_django import zk_lock


@zk_lock("invoice-{pk}")  # one request per invoice at a time
def send_invoice(request: HttpRequest, pk: int) -> HttpResponse:
    sent.append(pk)
    write_audit(f"invoice {pk} sent")
    return HttpResponse(f"invoice {pk} sent")


@zk_lock("rebuild-index", timeout=30)  # wait up to 30 s for the previous one
def rebuild_index() -> None:
    build_report()


# --8<-- [end:zk_lock]


# --8<-- [start:on_busy]
from django.http import HttpRequest, HttpResponse

from zk_recipes_django import zk_lock


def come_back_later(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"invoice {pk} is being sent, try again shortly", status=409)


@zk_lock("invoice-{pk}", on_busy=come_back_later)  # the lock send_invoice takes
def remind(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"reminder for invoice {pk} sent")


# --8<-- [end:on_busy]


# --8<-- [start:on_unavailable]
# given: cached_report (your view of the last report built)
from django.http import HttpRequest, HttpResponse

from zk_recipes_django import zk_lock


@zk_lock("report-{pk}", on_unavailable=lambda request, pk: cached_report(request, pk))
def report(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"report {pk}")


# --8<-- [end:on_unavailable]


# --8<-- [start:class_based]
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views import View

from zk_recipes_django import zk_lock


@method_decorator(zk_lock("report-{pk}"), name="dispatch")
class ReportView(View):
    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return HttpResponse(f"report {pk}")


# --8<-- [end:class_based]


# --8<-- [start:locked]
# given: ledger (your books), refresh (your coroutine)
from zk_recipes_django import locked


def close_month(month: str) -> None:
    with locked(f"close-month-{month}", timeout=60) as lock:
        ledger.close(month, fencing_token=lock.fencing_token)


async def refresh_rates() -> None:
    async with locked("refresh-rates", timeout=0):
        await refresh()


# --8<-- [end:locked]


# --8<-- [start:current_lock]
# given: audit_log (your log, which refuses an entry with an older token than one it has)
from zk_recipes_django import current_lock


def write_audit(entry: str) -> None:  # called from a locked view, without the request
    lock = current_lock()  # the lock the view holds
    lock.check()  # LockLost if the session (and the lock with it) is gone
    audit_log.append(entry, fencing_token=lock.fencing_token)


# --8<-- [end:current_lock]


# --8<-- [start:metrics_view]
import prometheus_client
from django.http import HttpRequest, HttpResponse


def metrics_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        prometheus_client.generate_latest(), content_type=prometheus_client.CONTENT_TYPE_LATEST
    )


# --8<-- [end:metrics_view]


def with_kazoo() -> KazooClient:
    """The report as a project calling kazoo itself builds it (its client, for the caller)."""
    # --8<-- [start:kazoo_before]
    # given: build_report (your work)
    from django.conf import settings
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=settings.ZK_HOSTS)
    zk.start()  # once per process, in AppConfig.ready()
    with zk.Lock("/locks/report", "web-1"):
        build_report()
    # --8<-- [end:kazoo_before]
    return zk


def with_zk_recipes() -> None:
    # --8<-- [start:kazoo_after]
    # given: build_report (your work)
    from zk_recipes import Lock
    from zk_recipes_django import get_client

    with Lock(get_client(), "/locks/report", identifier="web-1"):
        build_report()
    # --8<-- [end:kazoo_after]
