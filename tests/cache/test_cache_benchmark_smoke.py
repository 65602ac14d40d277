"""The cache benchmark runs end to end, and the counts it reports hold (never speed).

Our load reads each node once and lists each directory once (kazoo's
TreeCache: two requests per node); a create or a data change costs one read,
a delete none; a reconnect on the same session costs about one read per
change (kazoo's: two per node).
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

    mix = document["mix"]
    # One read per create and per data change, none per delete (its notification is
    # final): the floor under one persistent recursive watch, 2/3 per change of the mix.
    ours = mix["ours"]
    assert ours["requests_per_create_median"] <= 1.1, mix
    assert ours["requests_per_change_median"] <= 1.1, mix
    assert ours["requests_per_mixed_change"] <= 0.70, mix
    assert ours["requests_per_delete_median"] <= 0.1, mix
    # kazoo's TreeCache reads, watches and re-lists the parent on a create.
    assert mix["kazoo"]["requests_per_create_median"] >= 2.5, mix

    reconnect = document["reconnect"]
    # The server's diff: the 10 changes, the root, setWatches2, the connection, pings.
    assert reconnect["ours"]["requests_median"] <= 10 + 30, reconnect
    assert reconnect["kazoo"]["requests_median"] > reconnect["ours"]["requests_median"], reconnect
