#!/usr/bin/env bash
# The demo: a throwaway real ZooKeeper and zk-recipes working against it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec .venv/bin/python example_projects/foundation_demo.py "$@"
