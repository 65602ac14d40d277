"""Celery's recipes in holders(): the layout its distribution registers, seen by any process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from celery import Celery

from zk_recipes import CreateMode, LeaderLatch, Lock, holders
from zk_recipes.testing.pytest_plugin import ClientFactory
from zk_recipes_celery import read_config

HOST = socket.gethostname()
PID = os.getpid()
TASK_ID = "0b6c4d1e-6f7a-4c9e-9d35-1f5cf2f0e0a1"


def test_singleton_and_beat_nodes_are_reported_as_celery_kinds(
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    app = Celery("proj", set_as_current=False)
    app.conf.zk_recipes_hosts = zk_hosts
    config = read_config(app.conf, app_name=app.main)
    reader, client = zk_client_factory(), zk_client_factory()
    singleton = Lock(client, f"{config.singleton_root}/proj.sync/task", identifier=TASK_ID)
    assert singleton.acquire()
    beat = LeaderLatch(client, config.beat_path, f"{HOST}:{PID}").start()
    assert beat.await_leadership(10)
    try:
        report = holders(reader, config.prefix)
        assert [(r.path, r.kind) for r in report] == [
            (config.beat_path, "celery beat"),
            (f"{config.singleton_root}/proj.sync/task", "celery singleton"),
        ]
        [leader] = report[0].holders
        assert (leader.owner.host, leader.owner.pid) == (HOST, PID)
        assert leader.identifier == f"{HOST}:{PID}"
        [holder] = report[1].holders
        assert (holder.identifier, holder.owner.pid) == (TASK_ID, PID)
        assert holder.fencing_token == singleton.fencing_token

        # A process that never imports zk_recipes_celery: the entry point names them.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZK_RECIPES_")}
        env.update(ZK_RECIPES_HOSTS=zk_hosts, ZK_RECIPES_NAMESPACE=zk_namespace)
        shown = subprocess.run(
            [sys.executable, "-m", "zk_recipes", "holders", "--json", config.prefix],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert [(r["path"], r["kind"]) for r in json.loads(shown.stdout)] == [
            (config.beat_path, "celery beat"),
            (f"{config.singleton_root}/proj.sync/task", "celery singleton"),
        ]
    finally:
        beat.close()
        singleton.release()


def test_queued_markers_and_invalid_beat_entries_are_shown_with_their_ids(
    zk_client_factory: ClientFactory, zk_hosts: str, zk_namespace: str
) -> None:
    app = Celery("proj", set_as_current=False)
    app.conf.zk_recipes_hosts = zk_hosts
    config = read_config(app.conf, app_name=app.main)
    client = zk_client_factory()
    queued = f"{config.queued_root}/proj.report/abc123"
    marker = {"id": TASK_ID, "task": "proj.report", "host": HOST, "pid": PID, "since": 1.5}
    client.create(queued, json.dumps(marker).encode(), parents=True)
    running = f"{config.queued_root}/proj.report/def456"
    client.create(running, json.dumps({"id": "t2"}).encode(), mode=CreateMode.EPHEMERAL)
    entries = f"{config.prefix}/schedule/proj/entries"
    good = {"task": "proj.tick", "schedule": {"every": 5}}
    bad = {"task": "proj.tick", "schedule": {"crontab": {"hour": "25"}}}
    client.create(f"{entries}/good", json.dumps(good).encode(), parents=True)
    client.create(f"{entries}/bad", json.dumps(bad).encode())

    report = {r.path: r for r in holders(client, config.prefix)}
    assert [(path, r.kind) for path, r in report.items()] == [
        (queued, "celery queued"),
        (running, "celery queued"),
        (f"{entries}/bad", "celery beat entry (invalid)"),
    ]
    [waiting] = report[queued].holders
    assert (waiting.identifier, waiting.owner.host, waiting.owner.pid) == (TASK_ID, HOST, PID)
    assert (waiting.session_id, waiting.since) == (0, 1.5)
    [started] = report[running].holders
    assert (started.identifier, started.session_id) == ("t2", client.session_id)
    [invalid] = report[f"{entries}/bad"].holders
    assert invalid.identifier is not None
    assert invalid.identifier.startswith("invalid: crontab hour '25': 25 is above 23")
