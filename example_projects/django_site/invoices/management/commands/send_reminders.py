"""``manage.py send_reminders``: run by cron on every host, sent by exactly one.

``LockedCommandMixin`` runs the command under the lock ``send-reminders``;
``--no-wait`` makes the other hosts give up at once (exit 75) instead of
sending the reminders again after the first one finishes.

The demo's way to keep it holding: with ``DEMO_HOLD_UNTIL`` naming a file, the
reminders are not done until that file exists (a minute at most), so
``django_demo.py`` can start the other hosts and ``zkstatus`` while this one
still holds the lock, however slow the machine. Cron leaves it unset.
"""

# Django is untyped here: its classes are Any.
# mypy: disallow-subclassing-any=False

from __future__ import annotations

# --8<-- [start:command]
from typing import Any

from django.core.management.base import BaseCommand

from invoices.demo_hold import hold_until_told
from invoices.models import Invoice
from zk_recipes_django import LockedCommandMixin


class Command(LockedCommandMixin, BaseCommand):
    help = "Remind every customer of their unpaid invoices (one host at a time)."
    lock_name = "send-reminders"  # default: the command's name
    lock_timeout = None  # default: wait as long as it takes (cron passes --no-wait)
    lock_alias = "default"

    def handle(self, *args: Any, **options: Any) -> None:
        customers = Invoice.objects.count()
        hold_until_told()  # the reminders go out (in the demo: until it says they are done)
        self.stdout.write(f"reminded {customers} customers")
        # --8<-- [end:command]
