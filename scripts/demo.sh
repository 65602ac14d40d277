#!/usr/bin/env bash
# The demo: throwaway real ZooKeeper servers and zk-recipes working against them.
#
#   bash scripts/demo.sh            the whole suite through faults in under a minute
#                                   (example_projects/showcase/showcase.py): Celery, Django,
#                                   Flask, the CLI, a queue, a cache and Curator's discovery
#                                   in Java; a report of claims and their evidence, exit 0
#                                   when every one held
#   bash scripts/demo.sh --list     the focused demos' names
#   bash scripts/demo.sh NAME...    those focused demos (e.g. bash scripts/demo.sh django celery)
#   bash scripts/demo.sh all        every focused demo, in order
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SHOWCASE="example_projects/showcase/showcase.py"
# name|what it shows|the script
DEMOS=(
    "client|The client: states, simulated expiry, protected create, guaranteed delete|example_projects/foundation/foundation_demo.py"
    "locks|Locks: two workers take turns and write to a store that refuses stale tokens|example_projects/recipes/lock_example.py"
    "leader|Leader election: three schedulers, one leader, failover; a selector's terms|example_projects/recipes/leader_example.py"
    "caches|Caches: a TreeCache through a cut, catching up with exactly the changes|example_projects/recipes/cache_example.py"
    "discovery|Service discovery: two hosts, a provider, one host leaving|example_projects/recipes/discovery_example.py"
    "celery|Celery: a singleton task on two workers, leader-only beat entries on two beats, kill -9 of the leader beat|example_projects/celery_site/celery_demo.py"
    "cli|The zk-recipes command: a cron job guarded on three hosts, a deploy's migration, a standby taking over|example_projects/cli/cli_demo.py"
    "django|Django: zklock around migrate on three pods, a locked view, a locked cron command, the admin page, Celery on the same settings|example_projects/django_site/django_demo.py"
    "flask|Flask: flask zk lock guarding a CLI task on three hosts, a locked view, the status blueprint|example_projects/flask_app/flask_demo.py"
    "fastapi|FastAPI: three clicks on one order under uvicorn's two workers, the health route, ZooKeeper paused, a stop while holding|example_projects/fastapi_app/fastapi_demo.py"
    "face|A face of your own: a plain WSGI app locked per invoice, on the framework kit alone|example_projects/frameworks/wsgi_face.py"
)

if (($# == 0)); then
    bash "$ROOT/scripts/bootstrap.sh"
    cd "$ROOT"
    echo "== The whole suite through faults on a 3-node ensemble: Celery, Django, Flask, the CLI, queues, caches and discovery"
    exec .venv/bin/python "$SHOWCASE"
fi
if [[ "$1" == "all" ]]; then
    set --
fi
if [[ "${1:-}" == "--list" ]]; then
    for demo in "${DEMOS[@]}"; do
        IFS="|" read -r name what _script <<<"$demo"
        printf '%-10s %s\n' "$name" "$what"
    done
    exit 0
fi
for wanted in "$@"; do
    if ! printf '%s\n' "${DEMOS[@]}" | grep -q "^${wanted}|"; then
        echo "no demo named '$wanted': bash scripts/demo.sh --list names them" >&2
        exit 2
    fi
done

bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
number=0
for demo in "${DEMOS[@]}"; do
    IFS="|" read -r name what script <<<"$demo"
    if (($#)) && ! printf '%s\n' "$@" | grep -qx "$name"; then
        continue
    fi
    number=$((number + 1))
    ((number == 1)) || echo
    echo "== $number. $what ($name)"
    .venv/bin/python "$script"
done
