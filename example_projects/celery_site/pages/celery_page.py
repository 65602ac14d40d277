"""The app of docs/integrations/celery.md, as the page shows it; the test suite runs it.

The page's other examples are task modules of this app (``celery_*_page.py``
beside it). tests/integrations/celery/test_celery_page.py starts a worker on it,
``celery -A celery_page worker``, with the environment naming its Redis and
ZooKeeper (``REDIS_URL``, ``ZK_HOSTS``, ``ZK_NAMESPACE``), and publishes from
the test process. The stand-ins for your storage and work are in
``_celery_stand_ins.py``.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

import os

from _celery_stand_ins import send_report, store

# --8<-- [start:setup]
# given: store (your storage: it refuses a stale token), send_report (your work)
from celery import Celery, Task

from zk_recipes_celery import current_singleton, leader_only, singleton_task

app = Celery("proj", broker="redis://127.0.0.1:6379/0")
app.conf.zk_recipes_hosts = "zk1:2181,zk2:2181,zk3:2181"
app.conf.zk_recipes_session_timeout = 10.0  # kill -9 of a holder frees its locks after this


@app.task(bind=True)
@singleton_task(key=["account_id"])  # one run per account at a time
def sync_account(self: Task, account_id: int) -> None:
    token = current_singleton().fencing_token  # hand it to storage that refuses stale writers
    store.write(account_id, fencing_token=token)


@app.task
@leader_only  # sent by the leader beat only
def nightly_report() -> None:
    send_report()


# --8<-- [end:setup]

# The test's Redis and ZooKeeper in place of the hosts above, a result backend for
# the test to wait on, and the page's other task modules for the worker to load.
app.conf.update(
    broker_url=os.environ["REDIS_URL"],
    result_backend=os.environ["REDIS_URL"],
    broker_connection_retry_on_startup=True,
    zk_recipes_hosts=os.environ["ZK_HOSTS"],
    zk_recipes_namespace=os.environ["ZK_NAMESPACE"],
    imports=["celery_base_class_page", "celery_publish_page", "celery_fencing_page"],
)

# --8<-- [start:install]
# given: app (your Celery app)
import zk_recipes_celery

zk_recipes_celery.install(app)  # idempotent: the hooks and the worker's start-up check
# --8<-- [end:install]
