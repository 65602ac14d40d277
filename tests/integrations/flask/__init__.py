"""Flask integration tests (test client, CliRunner); skipped where Flask is not installed."""

import pytest

pytest.importorskip("flask")
