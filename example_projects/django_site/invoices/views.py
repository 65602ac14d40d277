"""Sending an invoice twice at once would email the customer twice: one sender per invoice.

``@zk_lock("invoice-{pk}")`` takes a lock per invoice across every web
process on every host; a second click while the first send runs gets 423
Locked at once. The fencing token is stored with the send, so a write made
under an older lock (a process paused past its session) can be refused.

Talking to the mail server is stood in for by ``hold_until_told()``: under the
demo, the send lasts until the demo has seen the other clicks refused
(``invoices/demo_hold.py``); anywhere else it takes no time.
"""
# Django is untyped here: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

# --8<-- [start:view]
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from invoices.demo_hold import hold_until_told
from invoices.models import Invoice
from zk_recipes_django import zk_lock


@csrf_exempt  # an API endpoint for the demo's HTTP client
@require_POST
@zk_lock("invoice-{pk}", timeout=0)
def send_invoice(request: HttpRequest, pk: int) -> HttpResponse:
    token = request.zk_lock.fencing_token
    hold_until_told()  # talking to the mail server (in the demo: until it says the send is over)
    # Only a newer lock may record a send: a stale holder's write changes nothing.
    updated = Invoice.objects.filter(pk=pk, sent_token__lt=token).update(
        sent_count=F("sent_count") + 1, sent_token=token
    )
    return JsonResponse({"invoice": pk, "sent": bool(updated), "fencing_token": token})


# --8<-- [end:view]
