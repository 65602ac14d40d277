"""Views the lock tests call (tests/integrations/django/test_views.py).

With ``?hold=1`` a view notes that it is inside and waits for the test's go
(``GATE`` for sync views, ``ASYNC_GATE`` for async ones), so a test decides
how long the lock is held and can count who is inside at once.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View

from zk_recipes import Lock
from zk_recipes_django import current_lock, zk_lock

#: The longest a held view waits for the test's go: a failed test never hangs on it.
HOLD_SECONDS = 30.0


class Gate:
    """Who is inside the locked views: how many now, the most at once, what they saw."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._mutex = threading.Lock()
        self.inside = 0
        self.most = 0
        self.entries = 0
        self.seen: list[dict[str, Any]] = []
        #: Set by each request that gets in.
        self.entered = threading.Event()
        #: Set by the test: held requests go on.
        self.go = threading.Event()

    def enter(self, request: HttpRequest) -> dict[str, Any]:
        lock: Lock = request.zk_lock
        now = current_lock()
        saw = {
            "token": lock.fencing_token,
            "current_token": now.fencing_token,
            "same": now is lock,
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


class AsyncGate(Gate):
    """Gate for async views: held requests wait on the event loop, not on a thread."""

    def reset(self) -> None:
        super().reset()
        self.async_entered = asyncio.Event()
        self.async_go = asyncio.Event()

    def enter(self, request: HttpRequest) -> dict[str, Any]:
        saw = super().enter(request)
        self.async_entered.set()
        return saw


GATE = Gate()
ASYNC_GATE = AsyncGate()


def _held(request: HttpRequest) -> bool:
    return bool(request.GET.get("hold") == "1")


def _inside_sync(request: HttpRequest) -> HttpResponse:
    saw = GATE.enter(request)
    try:
        if _held(request):
            GATE.go.wait(HOLD_SECONDS)
        return JsonResponse(saw)
    finally:
        GATE.leave()


async def _inside_async(request: HttpRequest) -> HttpResponse:
    saw = ASYNC_GATE.enter(request)
    try:
        if _held(request):
            await asyncio.wait_for(ASYNC_GATE.async_go.wait(), HOLD_SECONDS)
        return JsonResponse(saw)
    finally:
        ASYNC_GATE.leave()


@zk_lock("sync-gate")
def sync_busy(request: HttpRequest) -> HttpResponse:
    return _inside_sync(request)


@zk_lock("sync-gate", timeout=HOLD_SECONDS)
def sync_wait(request: HttpRequest) -> HttpResponse:
    return _inside_sync(request)


@zk_lock("async-gate")
async def async_busy(request: HttpRequest) -> HttpResponse:
    return await _inside_async(request)


@zk_lock("async-gate", timeout=HOLD_SECONDS)
async def async_wait(request: HttpRequest) -> HttpResponse:
    return await _inside_async(request)


async def async_ping(request: HttpRequest) -> HttpResponse:
    return HttpResponse("pong", content_type="text/plain")


@zk_lock("invoice-{pk}")
def invoice(request: HttpRequest, pk: str) -> HttpResponse:
    return _inside_sync(request)


def come_back_later(request: HttpRequest) -> HttpResponse:
    return HttpResponse("come back later", status=503, content_type="text/plain")


@zk_lock("custom-busy", on_busy=come_back_later)
def custom_busy(request: HttpRequest) -> HttpResponse:
    return _inside_sync(request)


async def conflict_later(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(0)
    return HttpResponse("conflict", status=409, content_type="text/plain")


@zk_lock("custom-busy", on_busy=conflict_later)
async def async_custom_busy(request: HttpRequest) -> HttpResponse:
    return await _inside_async(request)


@method_decorator(zk_lock("report-{pk}"), name="dispatch")
class ReportView(View):  # type: ignore[misc]
    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return _inside_sync(request)
