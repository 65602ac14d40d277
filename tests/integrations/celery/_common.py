"""What the Celery tests share beyond the public harness (``zk_recipes_celery.testing``)."""

from __future__ import annotations

#: Session timeout the worker tests give their Celery processes (``ZK_SESSION_TIMEOUT``):
#: short, since the kill -9 tests wait for it to expire.
SESSION_TIMEOUT = 3.0
