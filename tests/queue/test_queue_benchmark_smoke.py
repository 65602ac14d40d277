"""The queue benchmark runs end to end, and the counts it reports hold (never speed).

A put is one request (one multi: the item and the producer's marker); a
take is two without a lock path (a read and a delete, pipelined) and four
with one (claim, read, the commit, the claim's delete), where kazoo's
LockingQueue takes seven.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "queues.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_queue_benchmark_counts() -> None:
    command = [sys.executable, str(SCRIPT), "--tiny", "--runs", "1"]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=110, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout)
    for section in ("plain", "locked"):
        ours = document[section]["ours"]
        # A few requests more than the items: the first put makes the marker's directory.
        assert ours["put"]["requests_per_item"] <= 1.3, document[section]
    assert document["plain"]["ours"]["take"]["requests_per_item"] <= 2.3, document["plain"]
    locked = document["locked"]
    assert locked["ours"]["take"]["requests_per_item"] <= 4.3, locked
    assert locked["kazoo"]["take"]["requests_per_item"] >= 6.0, locked
    assert document["multi"]["requests_per_item"] <= 0.2, document["multi"]
    four = document["four"]
    assert four["items"] == 28  # 30, less what four producers cannot share evenly
    for kind in ("plain", "locked"):
        assert {"ours", "kazoo"} <= set(four[kind]), four
