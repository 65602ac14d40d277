"""One consumer process of the showcase's job queue: ``python showcase_queue_worker.py HOSTS LOG``.

It consumes ``/jobs`` (namespace ``/showcase``) with a lock path,
``/jobs-claims``: each job is claimed first, and its commit, a node
``/jobs-done/job-<n>-<pid>``, is written in the item's own transaction, so it
applies with the job's delete or not at all. A session of 2 s, so that a
consumer killed with -9 frees its claim within 2 s.

Each job it starts is a JSON line in LOG (``started``: the job, this pid, the
claim's fencing token); a job marked ``hang`` hangs the first consumer that
starts it (the showcase kills that one there) and runs at once when started
again. SIGTERM closes the queue and the session.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from zk_recipes import JSON, DistributedQueue, ItemContext, ZkClient

NAMESPACE = "/showcase"
QUEUE, CLAIMS, DONE = "/jobs", "/jobs-claims", "/jobs-done"
SESSION_TIMEOUT = 2.0


def started_before(log: Path, job: int) -> bool:
    """Whether another consumer started ``job`` already (this one would be the redo)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return any(
        entry["event"] == "started" and entry["job"] == job and entry["pid"] != os.getpid()
        for entry in map(json.loads, lines)
    )


def record(log: Path, **entry: Any) -> None:
    with log.open("a") as out:  # one short line per write: appends do not interleave
        out.write(json.dumps({**entry, "pid": os.getpid(), "t": time.time()}) + "\n")


def main(hosts: str, log: Path) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def run(job: dict[str, Any], context: ItemContext) -> None:
        redo = started_before(log, job["n"])
        record(log, event="started", job=job["n"], token=context.fencing_token)
        if job.get("hang") and not redo:
            stop.wait(120)  # the showcase kills this process here
            if stop.is_set():
                raise RuntimeError("stopped mid-job")  # an attempt that failed: tried again
        context.transaction().create(f"{DONE}/job-{job['n']}-{os.getpid()}")

    with (
        ZkClient(hosts, namespace=NAMESPACE, session_timeout=SESSION_TIMEOUT) as client,
        DistributedQueue(client, QUEUE, run, lock_path=CLAIMS, serializer=JSON),
    ):
        record(log, event="ready")
        stop.wait()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
