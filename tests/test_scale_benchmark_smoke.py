"""The scale benchmark runs end to end, its counts hold, and its JSON can be drawn.

Only counts are checked, never speed (benchmarks measure, tests assert): each
release of our lock wakes exactly one waiter at every queue length, and a
hand-off costs the requests it should. The plots are drawn by whichever of
this interpreter and the project's .venv (the ``dev`` extra brings
matplotlib through ``bench``) has matplotlib; neither: skipped.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "scale.py"
PLOT = ROOT / "benchmarks" / "plot_scale.py"
SECTIONS = ("handoff_threads", "handoff_processes", "tree", "queue", "sessions")
HANDOFF_FIGURES = (
    "waiters",
    "steps",
    "handoff",
    "requests_per_handoff",
    "notifications_per_release",
    "notifications_per_release_min_max",
    "queue_build_s",
    "clients",
)


@pytest.mark.slow
def test_scale_benchmark_counts(request: pytest.FixtureRequest) -> None:
    command = [sys.executable, str(SCRIPT), "--quick", "--sections", "handoff_threads"]
    hosts = request.config.getoption("--zk-hosts")
    if hosts:
        command += ["--hosts", str(hosts)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=55, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout)

    assert set(document) == {"meta", "notes", *SECTIONS}
    assert document["meta"]["quick"] is True
    assert [s for s in SECTIONS if document[s] is not None] == ["handoff_threads"]
    waiters = document["handoff_threads"]["waiters"]
    assert sorted(waiters, key=int) == ["1", "10", "100"]
    for length, run in waiters.items():
        assert set(run) == {"kazoo_lock", "ours", "ratios"}, length
        for impl in ("kazoo_lock", "ours"):
            assert set(HANDOFF_FIGURES) <= set(run[impl]), (length, impl)
            assert {"p50_ms", "p90_ms"} <= set(run[impl]["handoff"]), (length, impl)
        ours = run["ours"]
        # One release wakes one waiter, whatever the queue's length.
        assert ours["notifications_per_release_min_max"] == [1, 1], (length, ours)
        # The delete, and the woken waiter's one re-list (none when it was second in line).
        assert ours["requests_per_handoff"] <= 2.2, (length, ours)


def _interpreter_with_matplotlib() -> str:
    if importlib.util.find_spec("matplotlib") is not None:
        return sys.executable
    venv = ROOT / ".venv" / "bin" / "python"
    if venv.exists():
        probe = subprocess.run([venv, "-c", "import matplotlib"], capture_output=True, check=False)
        if probe.returncode == 0:
            return str(venv)
    pytest.skip("matplotlib is not installed (pip install -e '.[bench]')")


def _handoff(waiters: int, p50: float) -> dict[str, Any]:
    run = {
        "handoff": {"p50_ms": p50, "p90_ms": p50 * 1.5},
        "requests_per_handoff": 2.0,
        "notifications_per_release": 1.0,
    }
    return {"kazoo_lock": run, "ours": {**run, "handoff": {"p50_ms": p50 / 2, "p90_ms": p50}}}


def _clients(count: int, per_client: int) -> dict[str, Any]:
    return {
        "threads_os": 1 + per_client * count,
        "rss_added_bytes": 100_000 * count,
        "server_pings_per_s": count / 3,
        "idle_cpu_percent": count / 20,
    }


def test_plot_scale_draws_the_families_a_run_has(tmp_path: Path) -> None:
    python = _interpreter_with_matplotlib()
    document = {
        "meta": {"quick": True},
        "handoff_threads": {"waiters": {str(n): _handoff(n, 1.0 + n / 1000) for n in (1, 10)}},
        "handoff_processes": None,
        "tree": None,
        "queue": None,
        "sessions": {
            "session_timeout_s": 10.0,
            "counts": {str(n): {"ours": _clients(n, 4), "kazoo": _clients(n, 3)} for n in (1, 100)},
        },
    }
    source = tmp_path / "scale-2026-01-01.json"
    source.write_text(json.dumps(document))
    out = tmp_path / "img"
    command = [python, str(PLOT), "--json", str(source), "--out-dir", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=50, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    drawn = sorted(path.name for path in out.iterdir())
    assert drawn == ["scale-handoff.png", "scale-sessions.png"]
    for name in drawn:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def _figures() -> Any:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_figures_page_names_each_curve_s_shape() -> None:
    shape = _figures().shape
    assert shape([1, 10, 100], [2.0, 2.1, 1.9]).startswith("**flat**")
    assert shape([1000, 10_000, 100_000], [0.1, 1.0, 10.2]).startswith("**linear**")
    knee = shape([1, 10, 100, 1000], [2.0, 2.1, 2.0, 6.0])
    assert knee.startswith("**flat, then a knee at 100**"), knee
