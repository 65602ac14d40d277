"""slowcmd, but always under its own lock (``LockedCommandMixin``)."""

from __future__ import annotations

from tests.integrations.django.site.testapp.management.commands import slowcmd
from zk_recipes_django import LockedCommandMixin


class Command(LockedCommandMixin, slowcmd.Command):
    lock_name = "nightly-report"
