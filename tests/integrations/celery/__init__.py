"""Celery integration tests: in-process (eager) and with real workers, beats and Redis."""

import pytest

pytest.importorskip("celery")
