"""``manage.py send_reminders``: run by cron on every host, sent by exactly one.

``LockedCommandMixin`` runs the command under the lock ``send-reminders``;
``--no-wait`` makes the other hosts give up at once (exit 75) instead of
sending the reminders again after the first one finishes.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from invoices.models import Invoice
from zk_recipes_django import LockedCommandMixin


class Command(LockedCommandMixin, BaseCommand):  # type: ignore[misc]
    help = "Remind every customer of their unpaid invoices (one host at a time)."
    lock_name = "send-reminders"

    def handle(self, *args: Any, **options: Any) -> None:
        time.sleep(1.0)  # the reminders go out
        self.stdout.write(f"reminded {Invoice.objects.count()} customers")
