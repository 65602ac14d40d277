"""The peers' documented examples, ported in docs/integrations/migrating.md, run on real workers.

Each file of example_projects/migrating/ is a Celery app and a ``main()``
that does what the peer's README shows and asserts the outcome. A worker
(and, for redbeat's, a beat on ZkScheduler) runs it here with Redis and
ZooKeeper. The page's code blocks are copied from these files: the last
test checks each block still is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zk_recipes_celery.testing import CeleryProject

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "example_projects" / "migrating"
PAGE = ROOT / "docs" / "integrations" / "migrating.md"


def _project(project: CeleryProject) -> CeleryProject:
    project.app_dir = EXAMPLES
    project.env["RESULTS_FILE"] = str(project.base_dir / "results.txt")
    return project


def _main(project: CeleryProject, module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}; {module}.main()"],
        env=project.subprocess_env(),
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("module", ["from_celery_singleton", "from_celery_once"])
def test_publish_dedup_examples(project: CeleryProject, module: str) -> None:
    _project(project).start_worker(module, concurrency=2)
    assert "examples: ok" in _main(project, module)


def test_redbeat_examples(project: CeleryProject) -> None:
    _project(project).start_worker("from_redbeat", concurrency=2)
    project.start_beat("from_redbeat", scheduler="zk_recipes_celery.beat:ZkScheduler")
    assert "redbeat examples: ok" in _main(project, "from_redbeat")


def test_the_page_includes_the_tested_files() -> None:
    text = PAGE.read_text()
    for name in ("from_celery_singleton.py", "from_celery_once.py", "from_redbeat.py"):
        for section in ("tasks", "main"):
            assert f'--8<-- "example_projects/migrating/{name}:{section}"' in text, (name, section)
