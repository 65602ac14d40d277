"""The cache benchmark runs end to end, and the counts it reports hold (never speed).

Our load reads each node once and lists each directory once (kazoo's
TreeCache: two requests per node); a change costs one read; a reconnect on
the same session costs about one read per change (kazoo's: two per node).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "caches.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cache_benchmark_counts() -> None:
    command = [sys.executable, str(SCRIPT), "--tiny", "--runs", "1"]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=110, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout)

    load = document["load"]["200"]
    nodes = load["ours"]["nodes"]
    assert nodes == load["kazoo"]["nodes"] == 200 + 2 + 1
    # A get per node, a get_children per directory (3), the watch: a few more for pings.
    assert nodes <= load["ours"]["requests_median"] <= nodes + 3 + 10, load["ours"]
    assert load["kazoo"]["requests_median"] >= 2 * nodes, load["kazoo"]

    for impl in ("tree_ours", "node_ours"):
        assert document["latency"][impl]["requests_per_change_median"] <= 1.2, document["latency"]

    churn = document["churn"]
    # A create and a delete: one read each for ours; kazoo re-lists and re-reads.
    assert churn["ours"]["requests_per_create_and_delete_median"] <= 2.2, churn
    assert churn["kazoo"]["requests_per_create_and_delete_median"] >= 3.0, churn

    reconnect = document["reconnect"]
    # The server's diff: the 10 changes, the root, setWatches2, the connection, pings.
    assert reconnect["ours"]["requests_median"] <= 10 + 30, reconnect
    assert reconnect["kazoo"]["requests_median"] > reconnect["ours"]["requests_median"], reconnect
