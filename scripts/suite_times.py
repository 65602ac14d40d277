"""Where the suite's time goes: each pytest run's time by test file, from .test-logs/*.xml.

``scripts/test.sh`` keeps every test's time of each of its pytest runs in
``.test-logs/<run>.xml`` (JUnit XML); this prints, per run, its total and its
files from the slowest, so the runs side by side can be balanced and the
costly files seen (the printed 30 slowest tests do not add up to a run).

    python scripts/suite_times.py [--top N] [.test-logs]
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def file_times(report: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown) of one JUnit XML report."""
    times: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "?").split("::")[0]
        parts = module.split(".")
        # "tests.cli.test_cli" or "tests.cli.test_cli.TestClass": the file is the test_ part.
        while len(parts) > 1 and not parts[-1].startswith("test_"):
            parts.pop()
        times["/".join(parts) + ".py"] += float(case.get("time", 0.0))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="?", default=".test-logs", type=Path)
    parser.add_argument("--top", type=int, default=15, help="files shown per run")
    args = parser.parse_args(argv)
    reports = sorted(args.logs.glob("*.xml"))
    if not reports:
        print(f"no JUnit XML in {args.logs}: run scripts/test.sh first", file=sys.stderr)
        return 1
    for report in reports:
        times = file_times(report)
        print(f"{report.stem}: {sum(times.values()):.0f} s in {len(times)} files")
        for name, seconds in sorted(times.items(), key=lambda item: -item[1])[: args.top]:
            print(f"  {seconds:7.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
