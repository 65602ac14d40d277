#!/usr/bin/env bash
# The whole test suite: lint, types, then every test against real servers.
#
# The core suite (tests/ without tests/integrations/) runs in .venv-core, which
# has only the core and its [test] and [metrics] extras (prometheus-client is the
# core's own optional metrics): it proves the core needs no framework.
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
# mypy and the docs' strict build: beside the tests in a whole run (they take a core
# for about 50 s, while the tests mostly wait on servers), before them when paths
# are given. Either failing fails the command; their output is printed at the end.
# The docs site is built once: its browser test (tests/integrations/test_docs_site.py,
# in the integrations' tail, which waits for the build) reads this build.
rm -rf .test-site .test-logs
mkdir -p .test-logs
export DOCS_SITE_BUILT_BY_TEST_SH="$ROOT/.test-site"
static_checks() {  # mypy, then the docs; each one's exit code in .test-logs/NAME.rc
    local rc=0
    .venv/bin/mypy > .test-logs/mypy.log 2>&1 || rc=$?
    echo "$rc" > .test-logs/mypy.rc
    rc=0
    NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir .test-site \
        > .test-logs/mkdocs.log 2>&1 || rc=$?
    echo "$rc" > .test-logs/mkdocs.rc
}
static_verdict() {  # print the checks' output; 1 if either failed
    local failed=0 name
    for name in mypy mkdocs; do
        echo "==> ${name}: exit $(cat .test-logs/$name.rc 2>/dev/null || echo '(did not end)')"
        cat ".test-logs/$name.log" 2>/dev/null || true
        [[ "$(cat .test-logs/$name.rc 2>/dev/null)" == 0 ]] || failed=1
    done
    return $failed
}
wait_for_docs_build() {  # the docs site's test reads the build: wait for it (bounded)
    local waited=0
    while [[ ! -e .test-logs/mkdocs.rc ]] && ((waited < 300)); do
        sleep 1
        waited=$((waited + 1))
    done
}

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

run_pytest() {  # [TIMES=NAME] run_pytest VENV ARGS...; call it as `run_pytest ... || rc=$?`
    # TIMES=NAME: every test's time kept in .test-logs/NAME.xml (JUnit XML), to see
    # where the suite's time goes beyond the 30 slowest printed.
    local venv="$1" times=()
    shift
    [[ -z "${TIMES:-}" ]] || times=("--junitxml=.test-logs/$TIMES.xml")
    "$venv/bin/python" -m pytest --durations=30 "${times[@]}" "$@"
}

if ((paths)); then
    phase "mypy --strict, docs: mkdocs build --strict"
    static_checks
    static_verdict
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

found = [m for m in ("celery", "kombu", "redis", "django", "flask", "starlette", "fastapi") if importlib.util.find_spec(m)]
if found:
    sys.exit(f".venv-core must hold the core, [test] and [metrics] only, but has {found}")
PY
# The core suite and the integrations' suites run side by side: three pytest
# processes (the core in two parts; the first then takes on the integrations'
# tail, the second Django 4.2), each with throwaway servers of its own on
# free ports and a namespace per test, so they share nothing but the machine. Most of a
# real-server suite's time is waiting (timeouts, expiries, processes starting),
# which the two overlap. The core's output comes as it runs; the integrations'
# is kept in .test-logs/ and printed when both are done.
# ZK_RECIPES_TESTS_SERIAL=1 runs them one after the other instead.
core=0
integrations=0
django42=0
both_parts() {  # both_parts RC_A RC_B: one run's code for two parts of it
    # Each part collects tests unless a selection left it empty: 5 only if both are.
    if [[ $1 -eq 5 ]] || [[ $2 -ne 0 && $2 -ne 5 ]]; then
        echo "$2"
    else
        echo "$1"
    fi
}
# The integrations' tests that the core's first part takes on once it is done
# (side by side, the integrations' run would otherwise end long after both core parts).
INTEGRATIONS_TAIL=(tests/integrations/flask tests/integrations/starlette tests/integrations/test_docs_site.py
    tests/integrations/test_front_doors.py tests/integrations/test_showcase.py)
integrations_main() {  # the integrations in .venv (INTEGRATIONS_SPLIT=1: without the tail)
    local start=$SECONDS rc=0 ignore=()
    if [[ "${INTEGRATIONS_SPLIT:-}" == 1 ]]; then
        for path in "${INTEGRATIONS_TAIL[@]}"; do
            ignore+=("--ignore=$path")
        done
    fi
    [[ "${INTEGRATIONS_SPLIT:-}" == 1 ]] || wait_for_docs_build  # its docs site test
    echo "==> pytest: tests/integrations/, in .venv"
    TIMES=integrations run_pytest .venv tests/integrations "${ignore[@]}" "$@" || rc=$?
    echo "$rc" > .test-logs/integrations.rc
    echo "==> pytest: tests/integrations/, in .venv: $((SECONDS - start)) s"
}
integrations_tail() {  # the rest of the integrations, in .venv
    local start=$SECONDS rc=0
    wait_for_docs_build
    echo "==> pytest: ${INTEGRATIONS_TAIL[*]}, in .venv"
    TIMES=integrations-tail run_pytest .venv "${INTEGRATIONS_TAIL[@]}" "$@" || rc=$?
    echo "$rc" > .test-logs/integrations-tail.rc
    echo "==> pytest: the integrations' tail, in .venv: $((SECONDS - start)) s"
}
django42_run() {
    # Django 4.2 LTS as well as the 5.2 of .venv: the Django tests again (not the
    # slow ones: they repeat the engine's fault handling; not the browser's: a page is
    # read in a real browser once), with 4.2 ahead on the path.
    local start rc=0
    if ((!selecting)); then
        start=$SECONDS
        echo "==> pytest: tests/integrations/django/ on Django 4.2 LTS"
        if [[ ! -d .django42/django ]]; then
            .venv/bin/python -m pip install -q --target .django42 "Django>=4.2,<5" >/dev/null
        fi
        PYTHONPATH="$ROOT/.django42" TIMES=django42 run_pytest .venv tests/integrations/django -m "not slow and not browser" \
            -p no:cacheprovider "$@" || rc=$?
        echo "==> pytest: tests/integrations/django/ on Django 4.2 LTS: $((SECONDS - start)) s"
    fi
    echo "$rc" > .test-logs/django42.rc
}
integrations_runs() {  # the integrations in .venv, then the Django tests on Django 4.2 LTS
    integrations_main "$@"
    django42_run "$@"
}
# The core suite runs in two parts side by side, each about half its time: the
# session layer and the families that wait out faults the most (FAULT_HEAVY),
# and the rest. Each part has throwaway servers of its own, as the integrations do.
FAULT_HEAVY=(tests/client tests/cache tests/queue tests/chaos tests/interop tests/discovery tests/counters
    tests/barriers)
not_fault_heavy=()
for dir in tests/integrations "${FAULT_HEAVY[@]}"; do
    not_fault_heavy+=("--ignore=$dir")
done
static_checks &
static_pid=$!
if [[ "${ZK_RECIPES_TESTS_SERIAL:-}" == 1 ]]; then
    phase "pytest: the core suite, in .venv-core"
    TIMES=core run_pytest .venv-core --ignore=tests/integrations "$@" || core=$?
    phase "pytest: the integrations"
    integrations_runs "$@"
else
    phase "pytest: the core suite in two parts (.venv-core) beside the integrations (.venv; .test-logs/)"
    INTEGRATIONS_SPLIT=1 integrations_main "$@" > .test-logs/integrations.log 2>&1 &
    integrations_pid=$!
    core_heavy=0
    {
        start=$SECONDS
        echo "==> pytest: the core suite, part 1: ${FAULT_HEAVY[*]}"
        TIMES=core-1 run_pytest .venv-core "${FAULT_HEAVY[@]}" "$@" || core_heavy=$?
        echo "$core_heavy" > .test-logs/core-heavy.rc
        echo "==> pytest: the core suite, part 1: $((SECONDS - start)) s"
        integrations_tail "$@"
    } > .test-logs/core-heavy.log 2>&1 &
    core_heavy_pid=$!
    start=$SECONDS
    echo "==> pytest: the core suite, part 2: the rest"
    TIMES=core-2 run_pytest .venv-core "${not_fault_heavy[@]}" "$@" || core=$?
    echo "==> pytest: the core suite, part 2: $((SECONDS - start)) s"
    django42_run "$@"  # the shortest of the three runs takes it on
    wait "$core_heavy_pid" || true
    cat .test-logs/core-heavy.log
    core=$(both_parts "$core" "$(cat .test-logs/core-heavy.rc 2>/dev/null || echo 1)")
    wait "$integrations_pid" || true
    cat .test-logs/integrations.log
fi
integrations=$(cat .test-logs/integrations.rc 2>/dev/null || echo 1)
if [[ "${ZK_RECIPES_TESTS_SERIAL:-}" != 1 ]]; then  # the tail ran apart
    integrations=$(both_parts "$integrations" "$(cat .test-logs/integrations-tail.rc 2>/dev/null || echo 1)")
fi
django42=$(cat .test-logs/django42.rc 2>/dev/null || echo 1)

wait "$static_pid" || true
static=0
static_verdict || static=1

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
if ((static)); then
    echo "mypy or the docs' strict build failed (their output is above)" >&2
    exit 1
fi
verdict "$core" "$integrations" "core" || exit $?
verdict "$integrations" "$core" "integrations" || exit $?
exit $django42
