"""The examples of docs/operations.md, docs/retry.md and docs/cli.md; the test suite runs them.

``python example_projects/recipes/pages/operations_page.py`` runs them on a throwaway server.
"""

from __future__ import annotations


def read_config() -> bytes:
    """Your code: a read that may meet a transient ZooKeeper error (here: it does not)."""
    return b"{}"


def main(hosts: str) -> None:
    path_templates()
    registries()
    reading_holders(hosts)
    layouts()
    retry_call()
    retry_policies(hosts)
    run_a_command_locked(hosts)
    metrics_endpoint(hosts)
    logging_behind_a_queue()
    json_logs()


def path_templates() -> None:
    # --8<-- [start:path_templates]
    from zk_recipes import metrics

    metrics.path_template("/jobs/{job}/lock", name="job-lock")  # label "job-lock"
    metrics.path_template("/tenants/*/quota")  # label "/tenants/*/quota"
    metrics.path_template("/reports/**", name="reports")  # /reports and all below
    # --8<-- [end:path_templates]
    assert "/jobs/{job}/lock" in metrics.path_templates()


def registries() -> None:
    from zk_recipes import metrics

    before = metrics.registry()
    # --8<-- [start:registries]
    import prometheus_client

    from zk_recipes import metrics

    registry = prometheus_client.CollectorRegistry()
    metrics.enable(registry)  # record there from now on
    metrics.registry()  # the registry recorded into (None when disabled)
    metrics.disable()  # stop recording: recipes skip every metric
    metrics.enable()  # back to prometheus_client.REGISTRY
    metrics.is_enabled()
    # --8<-- [end:registries]
    if before is None:
        metrics.disable()
    else:
        metrics.enable(before)


def reading_holders(hosts: str) -> None:
    # --8<-- [start:holders]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    import json

    from zk_recipes import ZkClient, holders, holders_table

    with ZkClient(hosts, namespace="myapp").start() as client:
        report = holders(client, "/")  # list[RecipeHolders], sorted by path
        print(holders_table(report))  # for people
        json.dumps([r.as_dict() for r in report])  # for programs
    # --8<-- [end:holders]


def layouts() -> None:
    # --8<-- [start:layouts]
    from zk_recipes import Owner, RecipeLayout, register_layout

    register_layout(RecipeLayout("job lock", base="lock", path="jobs/*/lock"))
    register_layout(
        RecipeLayout(
            "cron leader",
            base="leader latch",  # "lock", "read-write lock", "semaphore" or "leader latch"
            path="cron/*",  # the directory's last segments; * is any one segment
            owner_of_data=lambda data: Owner(host=data),  # for node data that is not owner JSON
        )
    )
    # --8<-- [end:layouts]


def retry_call() -> None:
    # --8<-- [start:retry_call]
    # given: read_config (your read, which may meet a transient ZooKeeper error)
    import time

    from zk_recipes import ExponentialBackoffRetry, retry

    policy = ExponentialBackoffRetry(0.1, 5, max_sleep=2.0)
    data = retry(policy, lambda: read_config(), deadline=time.monotonic() + 10.0)
    # --8<-- [end:retry_call]
    assert data == b"{}"


def retry_policies(hosts: str) -> None:
    # --8<-- [start:retry_policies]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import BoundedExponentialBackoffRetry, PlateauRetry, ZkClient

    # A web request: fail fast, never wait more than a second between tries.
    client = ZkClient(hosts, retry_policy=BoundedExponentialBackoffRetry(0.05, 1.0, 4))

    # A long-running worker holding locks or leadership: ride out any outage.
    client = ZkClient(hosts, retry_policy=PlateauRetry(0.1, 6, 5.0, 15.0))
    # --8<-- [end:retry_policies]
    client.close()


def run_a_command_locked(hosts: str) -> None:
    # --8<-- [start:run_locked]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    import sys

    from zk_recipes import ZkClient
    from zk_recipes.cli import ExitCode, run_locked

    migrate = [sys.executable, "-c", "print('migrated')"]  # ["./manage.py", "migrate"]
    with ZkClient(hosts, namespace="myapp") as client:
        code = run_locked(client, "db-migrate", migrate, timeout=600)
        if code == ExitCode.TIMED_OUT:
            ...
    # --8<-- [end:run_locked]
    assert code == 0


def metrics_endpoint(hosts: str) -> None:
    """A scrape of the example's endpoint shows the client's gauges."""
    import urllib.request

    from zk_recipes import ZkClient, metrics
    from zk_recipes.testing import free_ports

    before = metrics.registry()
    metrics.enable()
    (port,) = free_ports(1)  # 9100 on the page
    try:
        # --8<-- [start:metrics_http]
        # given: port (the port Prometheus scrapes, e.g. 9100)
        import prometheus_client

        server, thread = prometheus_client.start_http_server(port)  # /metrics on that port
        # --8<-- [end:metrics_http]
        with ZkClient(hosts, namespace="myapp"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as answer:
                assert b"zk_recipes_" in answer.read()
        server.shutdown()
        server.server_close()
        thread.join()
    finally:
        if before is None:
            metrics.disable()
        else:
            metrics.enable(before)


def logging_behind_a_queue() -> None:
    """A record logged behind the queue reaches the (here: in-memory) stream."""
    import io
    import logging

    stream = io.StringIO()  # on the page: stderr, piped to a log shipper
    root = logging.getLogger()
    handlers = list(root.handlers)
    # --8<-- [start:log_queue]
    # given: stream (where the logs go: stderr, piped to a log shipper)
    import logging.handlers
    import queue

    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    shipper = logging.StreamHandler(stream)  # the stream that may block
    listener = logging.handlers.QueueListener(records, shipper)
    logging.getLogger().addHandler(logging.handlers.QueueHandler(records))
    listener.start()  # and listener.stop() at exit
    # --8<-- [end:log_queue]
    try:
        logging.getLogger("zk_recipes.example").warning("written by the listener's thread")
    finally:
        listener.stop()  # writes what is queued, then returns
        root.handlers[:] = handlers
    assert "written by the listener's thread" in stream.getvalue()


def json_logs() -> None:
    """A ``lock.lost`` record, as the lock logs it, comes out as one JSON object."""
    # --8<-- [start:json_formatter]
    import json
    import logging

    class ZkJsonFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            doc = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
            }
            doc.update({k: v for k, v in vars(record).items() if k.startswith("zk_")})
            return json.dumps(doc)

    # --8<-- [end:json_formatter]

    record = logging.getLogger("zk_recipes.lock").makeRecord(
        "zk_recipes.lock",
        logging.WARNING,
        __file__,
        1,
        "Lock %s LOST with session %s",
        ("/jobs/42/lock", "0x1000a2b3c4d0005"),
        None,
        extra={"zk_event": "lock.lost", "zk_recipe": "Lock", "zk_token": 4294967321},
    )
    doc = json.loads(ZkJsonFormatter().format(record))
    assert doc["zk_event"] == "lock.lost"
    assert doc["message"] == "Lock /jobs/42/lock LOST with session 0x1000a2b3c4d0005"


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("operations: ok")
