"""Django integration tests (pytest-django); skipped where Django is not installed."""

import pytest

pytest.importorskip("django")
