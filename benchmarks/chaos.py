"""The long chaos run: fenced locks, a latch, queues and discovery under every fault kind.

    python benchmarks/chaos.py [--duration S] [--workers N] [--seed K] [--kinds K1,K2,...]
                               [--families F1,F2,...] [--out FILE] [--keep DIR]

Starts its own 3-node ensemble (harness), runs the chaos run of
``tests/chaos/chaosrun`` for ``--duration`` seconds of load (600 is a good
long run: about 11 minutes in all) with the families chosen (all by default:
``locks``, ``queues``, ``discovery``), and prints the checker's JSON on stdout
(progress on stderr: each fault, its target, its time in the run). Exit
status 1 when a figure that must be zero is not. A fault that fails (a quorum
that does not come back in time) is listed in ``fault_errors`` and the run
goes on. Without ``--keep``, a run with a figure off keeps its history and
worker logs all the same, in a new directory named on stderr: a rare failure
is worth nothing without them. See docs/chaos.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The chaos run's engine (tests/chaos/chaosrun) lives beside its short test, in the
# tests package; spawned workers inherit sys.path, so they import it the same way.
sys.path.insert(0, str(ROOT))

from tests.chaos.chaosrun.check import off_figures  # noqa: E402
from tests.chaos.chaosrun.config import FAMILIES, SCHEDULE_KINDS, ChaosConfig  # noqa: E402
from tests.chaos.chaosrun.run import render, run_chaos  # noqa: E402
from zk_recipes import ZkClient  # noqa: E402
from zk_recipes.testing import ZooKeeperCluster  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--workers", type=int, default=8, help="worker processes (>= 2)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault schedule")
    parser.add_argument("--session-timeout", type=float, default=2.5)
    parser.add_argument(
        "--kinds",
        default=",".join(SCHEDULE_KINDS),
        help="comma-separated fault kinds to draw from (default: all, %(default)s)",
    )
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help="comma-separated families the workers run (default: all, %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the history and worker logs in DIR"
    )
    return parser.parse_args(argv)


def _say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # the admin client's reconnect chatter
    if args.workers < 2:
        raise SystemExit("--workers must be 2 or more")
    if args.keep is not None and (args.keep / "history.sqlite").exists():
        raise SystemExit(f"{args.keep} holds a run already; --keep needs a new or empty directory")
    try:
        config = ChaosConfig(
            duration=args.duration,
            workers=args.workers,
            seed=args.seed,
            session_timeout=args.session_timeout,
            kinds=tuple(kind for kind in args.kinds.split(",") if kind),
            families=tuple(family for family in args.families.split(",") if family),
        )
    except ValueError as exc:
        raise SystemExit(f"--kinds/--families: {exc}") from None
    namespace = f"/zk-recipes-chaos/{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="zk-chaos-") as scratch:
        run_dir = args.keep if args.keep is not None else Path(scratch)
        _say("starting a 3-node ensemble")
        with ZooKeeperCluster(size=3, quorum_proxies=True) as cluster:
            with ZkClient(cluster.connect_string, connection_timeout=30.0) as admin:
                admin.create(namespace, parents=True)
            report = run_chaos(cluster, namespace, run_dir, config, log=_say)
        bad = off_figures(report)
        if bad and args.keep is None:
            kept = Path(tempfile.mkdtemp(prefix="zk-chaos-failed-"))
            shutil.copytree(run_dir, kept, dirs_exist_ok=True)
            report["history"] = str(kept / "history.sqlite")
            _say(f"a figure is off: history and worker logs kept in {kept}")
    if args.keep is None and not bad:
        report.pop("history")
    document = render(report)
    print(document)
    if args.out is not None:
        args.out.write_text(document + "\n")
    summary = (
        f"{report['acquisitions']} acquisitions, {report['faults_applied']} faults "
        f"{report['faults']}, {len(report['fault_errors'])} failed"
    )
    if "queues" in report:
        summary += f", {report['queues']['items_consumed']} queue items consumed"
    if "discovery" in report:
        summary += f", {report['discovery']['snapshots']} discovery snapshots"
    if bad:
        _say(f"FAILED: non-zero {', '.join(bad)}; {summary}")
        return 1
    _say(f"ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
