#!/usr/bin/env bash
# The demo: throwaway real ZooKeeper servers and zk-recipes working against them:
# the client living through faults, then locks, then leader election.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
echo "== 1. The client: states, simulated expiry, protected create, guaranteed delete"
.venv/bin/python example_projects/foundation/foundation_demo.py
echo
echo "== 2. Locks: two workers take turns and write to a store that refuses stale tokens"
.venv/bin/python example_projects/recipes/lock_example.py
echo
echo "== 3. Leader election: three schedulers, one leader, failover; a selector's terms"
.venv/bin/python example_projects/recipes/leader_example.py
echo
echo "== 4. Celery: a singleton task on two workers, leader-only beat entries on two beats, kill -9 of the leader beat"
.venv/bin/python example_projects/celery_site/celery_demo.py
echo
echo "== 5. The zk-recipes command: a cron job guarded on three hosts, a deploy's migration, a standby taking over"
.venv/bin/python example_projects/cli/cli_demo.py
echo
echo "== 6. Django: zklock around migrate on three pods, a locked view, a locked cron command, the admin page, Celery on the same settings"
.venv/bin/python example_projects/django_site/django_demo.py
echo
echo "== 7. Flask: flask zk lock guarding a CLI task on three hosts, a locked view, the status blueprint"
.venv/bin/python example_projects/flask_app/flask_demo.py
echo
echo "== 8. A face of your own: a plain WSGI app locked per invoice, on the framework kit alone"
.venv/bin/python example_projects/frameworks/wsgi_face.py
