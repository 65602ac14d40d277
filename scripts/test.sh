#!/usr/bin/env bash
# The whole test suite: lint, types, then every test against real servers.
#
# The core suite (tests/ without tests/integrations/) runs in .venv-core, which
# has only the core and its [test] extra: it proves the core needs no framework.
# The framework integrations' tests (tests/integrations/) run in .venv, which has
# them all. Extra arguments go to both pytest runs (e.g. scripts/test.sh -k client -x);
# given test paths, pytest runs once, in .venv, on those paths only.
#
# Each pytest run lists its 30 slowest tests (--durations=30), and every phase
# prints how long it took, so the suite's cost stays visible (the budget: the
# whole command under 15 minutes on a 2-core machine; docs/testing.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
suite_start=$SECONDS
phase_start=$SECONDS
phase() {  # phase NAME: print the previous phase's duration, start timing NAME
    local now=$SECONDS
    if [[ -n "${PHASE:-}" ]]; then
        echo "==> ${PHASE}: $((now - phase_start)) s"
    fi
    PHASE="$1"
    phase_start=$now
    [[ -z "$1" ]] || echo "==> $1"
}
PHASE="set-up (bootstrap)"
bash "$ROOT/scripts/bootstrap.sh" --core-venv
cd "$ROOT"
phase "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
phase "mypy --strict"
.venv/bin/mypy

# pytest's exit code 5 means it collected no test: a failure here, unless the
# arguments select tests (-k, -m, ...) and the other run did run some.
selecting=0
paths=0
for arg in "$@"; do
    case "$arg" in
        -k | -m | --lf | --last-failed | --deselect | -k* | -m*) selecting=1 ;;
        -*) ;;
        *) if [[ -e "${arg%%::*}" ]]; then paths=1; fi ;;
    esac
done

run_pytest() {  # run_pytest VENV ARGS...; call it as `run_pytest ... || rc=$?`
    local venv="$1"
    shift
    "$venv/bin/python" -m pytest --durations=30 "$@"
}

if ((paths)); then
    phase "pytest (the given paths, in .venv)"
    rc=0
    run_pytest .venv "$@" || rc=$?
    if [[ $rc -eq 5 ]]; then
        echo "pytest collected no tests: that is a failure here" >&2
        exit 1
    fi
    exit $rc
fi

phase "no framework in .venv-core"
.venv-core/bin/python - <<'PY'
import importlib.util
import sys

found = [m for m in ("celery", "kombu", "redis", "django", "flask") if importlib.util.find_spec(m)]
if found:
    sys.exit(f".venv-core must hold the core and [test] only, but has {found}")
PY
phase "pytest: the core suite, in .venv-core"
core=0
run_pytest .venv-core --ignore=tests/integrations "$@" || core=$?
phase "pytest: tests/integrations/, in .venv"
integrations=0
run_pytest .venv tests/integrations "$@" || integrations=$?

# Django 4.2 LTS as well as the 5.2 of .venv: the Django tests again (not the slow
# ones: they repeat the engine's fault handling), with 4.2 ahead on the path.
django42=0
if ((!selecting)); then
    phase "pytest: tests/integrations/django/ on Django 4.2 LTS"
    if [[ ! -d .django42/django ]]; then
        .venv/bin/python -m pip install -q --target .django42 "Django>=4.2,<5" >/dev/null
    fi
    PYTHONPATH="$ROOT/.django42" run_pytest .venv tests/integrations/django -m "not slow" \
        -p no:cacheprovider "$@" || django42=$?
fi

phase ""
echo "==> the whole suite: $((SECONDS - suite_start)) s"

# 5 (nothing collected) is a failure, unless a selection matched tests of the other run only.
verdict() {  # verdict RC OTHER_RC NAME
    if [[ $1 -ne 5 ]]; then
        return "$1"
    fi
    if ((selecting)) && [[ $2 -ne 5 ]]; then
        return 0
    fi
    echo "pytest collected no tests in the $3 run: that is a failure here" >&2
    return 1
}
verdict "$core" "$integrations" "core" || exit $?
verdict "$integrations" "$core" "integrations" || exit $?
exit $django42
