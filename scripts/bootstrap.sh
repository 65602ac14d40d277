#!/usr/bin/env bash
# Shared set-up for the README's two commands: system packages, a venv, the
# Python dependencies. Safe to run again: each step is skipped when done.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# chromium + chromium-driver: the Django admin page's one real-browser test.
APT_PACKAGES=(zookeeper redis-server libcurator-recipes-java libcurator-framework-java libcurator-discovery-java chromium chromium-driver)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "zk-recipes needs: ${missing[*]} (Debian/Ubuntu packages)." >&2
        echo "Install them as root: apt-get install -y ${missing[*]}" >&2
        echo "or point ZOOKEEPER_HOME at an unpacked apache-zookeeper-3.8.x-bin." >&2
        [[ -n "${ZOOKEEPER_HOME:-}" ]] || exit 1
    else
        echo "==> apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
# Debian starts a system ZooKeeper/Redis on install; ours are throwaway servers on
# free ports, so the system ones are left alone (they do not get in the way).

PYTHON="${PYTHON:-python3}"

# ensure_venv DIR EXTRAS: a venv in DIR with zk-recipes installed (editable) with
# EXTRAS; skipped when pyproject.toml has not changed since the last install.
ensure_venv() {
    local venv="$1" extras="$2"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "==> creating $venv with $($PYTHON --version)"
        "$PYTHON" -m venv "$venv"
    fi
    local stamp="$venv/.zk-recipes-installed"
    local want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) [$extras]"  # new extras reinstall too
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
        echo "==> installing zk-recipes[$extras] into $venv"
        "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$venv/bin/python" -m pip install -q -e ".[$extras]"
        echo "$want" > "$stamp"
    fi
}

# scripts/test.sh runs the core suite in a venv with the core, [test] and
# [metrics] only (no framework; tests/test_metrics.py needs prometheus-client).
# Both venvs are made at once (pip waits on files more than on the CPU); the
# core venv's lines are printed after the other's.
core_pid=""
if [[ "${1:-}" == "--core-venv" ]]; then
    core_log="$(mktemp)"
    ensure_venv .venv-core test,metrics > "$core_log" 2>&1 &
    core_pid=$!
fi
ensure_venv .venv dev
if [[ -n "$core_pid" ]]; then
    core_rc=0
    wait "$core_pid" || core_rc=$?
    cat "$core_log"
    rm -f "$core_log"
    if [[ $core_rc -ne 0 ]]; then
        echo "making .venv-core failed (exit $core_rc)" >&2
        exit "$core_rc"
    fi
fi
