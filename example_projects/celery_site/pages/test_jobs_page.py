"""The test of the testing example on docs/integrations/celery.md, with ``conftest.py`` beside it.

tests/integrations/celery/test_celery_page.py runs it: ``python -m pytest
example_projects/celery_site/pages/test_jobs_page.py``.
"""

from __future__ import annotations

# --8<-- [start:test-jobs]
from zk_recipes_celery.testing import CeleryProject

APP = """
import os
from celery import Celery
from zk_recipes_celery import singleton_task
from zk_recipes_celery.testing import record

app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
app.conf.zk_recipes_namespace = os.environ["ZK_NAMESPACE"]

@app.task(name="proj.sync")
@singleton_task
def sync():
    record(event="ran")
"""


def test_sync_runs_on_a_prefork_worker(
    celery_project: CeleryProject, zk_hosts: str, zk_namespace: str
) -> None:
    celery_project.env.update(ZK_HOSTS=zk_hosts, ZK_NAMESPACE=zk_namespace)
    module = celery_project.write_app(APP)
    celery_project.start_worker(module, pool="prefork", concurrency=2)
    celery_project.client_app().send_task("proj.sync").get(timeout=20)
    assert [r["event"] for r in celery_project.read_records()] == ["ran"]


# --8<-- [end:test-jobs]
