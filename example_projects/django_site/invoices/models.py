from __future__ import annotations

from django.db import models


class Invoice(models.Model):  # type: ignore[misc]
    """An invoice; ``sent_token`` is the fencing token of the lock that sent it."""

    customer = models.CharField(max_length=100)
    sent_count = models.IntegerField(default=0)
    sent_token = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"invoice {self.pk} for {self.customer}"
