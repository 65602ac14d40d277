"""The Celery overhead benchmark runs end to end, and the counts it reports hold.

Only counts are checked, never speed (see tests/test_benchmarks_smoke.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CELERY_SCRIPT = ROOT / "benchmarks" / "celery_overhead.py"


@pytest.mark.slow
def test_celery_overhead_benchmark_runs(request: pytest.FixtureRequest) -> None:
    command = [sys.executable, str(CELERY_SCRIPT), "--quick"]
    hosts = request.config.getoption("--zk-hosts")
    if hosts:
        command += ["--hosts", str(hosts)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=40, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout)
    figures = document["results"]

    kinds = ["plain", "singleton", "singleton_keyed"]
    for kind in kinds:
        for side in ("worker_side", "end_to_end"):
            entry = figures[side][kind]
            assert entry["n"] == 20, (side, kind, entry)
            assert 0 < entry["p50_ms"] <= entry["p90_ms"], (side, kind, entry)
    for kind in ("lock_cycle", "lock_cycle_new_key", "raw_floor"):
        entry = figures["in_process"][kind]
        assert 0 < entry["p50_ms"] <= entry["p90_ms"], (kind, entry)
    assert set(figures["overhead"]) >= {"singleton_ms", "singleton_keyed_ms"}
    assert figures["ratios"]["singleton_overhead_over_lock_cycle"] is not None
    assert isinstance(figures["ratios"]["meets_target"], bool)

    # Counts are exact: our lock is 3 requests per run (create, list, delete), plain none.
    requests = document["requests"]
    assert requests["singleton"]["requests_each"] <= 3.2, requests
    assert requests["lock_cycle"]["requests_each"] <= 3.2, requests
    assert requests["plain"]["requests_each"] <= 0.2, requests


@pytest.mark.slow
def test_publish_benchmark_counts(request: pytest.FixtureRequest) -> None:
    """Publish dedup costs one ZooKeeper request per first publish and two per duplicate."""
    command = [sys.executable, str(ROOT / "benchmarks" / "celery_publish.py"), "--tiny"]
    command += ["--runs", "1", "--no-peer"]
    hosts = request.config.getoption("--zk-hosts")
    if hosts:
        command += ["--hosts", str(hosts)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    figures = json.loads(result.stdout)["results"]
    assert figures["plain"]["first"]["zk_requests_per_publish"] <= 0.2, figures["plain"]
    ours = figures["ours"]
    assert 0.9 <= ours["first"]["zk_requests_per_publish"] <= 1.2, ours
    assert 1.9 <= ours["duplicate"]["zk_requests_per_publish"] <= 2.2, ours
    assert ours["first"]["p50_us"] > 0
