"""Metrics and logs: what the recipes record, against a real server.

The tests that read metric values need prometheus-client (they skip without
it: the core suite runs without the extra); the path templates and the
no-metrics path are tested everywhere.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    ConfigurationError,
    ConnectionState,
    LeaderLatch,
    LeaderSelector,
    LeadershipContext,
    Lock,
    ReadWriteLock,
    RLock,
    Semaphore,
    SemaphoreMutex,
    ZkClient,
    metrics,
)
from zk_recipes._threads import said
from zk_recipes.testing import StateRecorder, TcpProxy, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

ROOT = Path(__file__).resolve().parent.parent


def value(registry: Any, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return float(found) if found is not None else 0.0


def lock_value(registry: Any, name: str, recipe: str = "Lock", template: str = "m") -> float:
    return value(registry, name, recipe=recipe, template=template)


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[Any]:
    """The records about ``event`` (typed Any: their ``zk_`` fields are set by ``extra=``)."""
    return [r for r in caplog.records if getattr(r, "zk_event", None) == event]


# -- path templates (no server, no prometheus-client needed) -------------------------------


def test_path_templates_name_series_and_the_rest_is_other(templates: None) -> None:
    assert metrics.template_of("/anything") == metrics.OTHER == "other"
    metrics.path_template("/jobs/{job}/lock", name="job-lock")
    metrics.path_template("/reports/**")
    metrics.path_template("/reports/daily", name="never: an earlier template matches")
    metrics.path_template("/tenants/*/locks/*")
    assert metrics.template_of("/jobs/42/lock") == "job-lock"
    assert metrics.template_of("/jobs/42/lock/x") == "other"
    assert metrics.template_of("/jobs/lock") == "other"
    assert metrics.template_of("/reports") == "/reports/**"
    assert metrics.template_of("/reports/daily") == "/reports/**"
    assert metrics.template_of("/reports/2024/01") == "/reports/**"
    assert metrics.template_of("/reportsX") == "other"
    assert metrics.template_of("/tenants/acme/locks/db") == "/tenants/*/locks/*"
    metrics.path_template("/jobs/{job}/lock", name="renamed")  # keeps its place
    assert metrics.template_of("/jobs/7/lock") == "renamed"
    assert list(metrics.path_templates()) == [
        "/jobs/{job}/lock",
        "/reports/**",
        "/reports/daily",
        "/tenants/*/locks/*",
    ]
    metrics.clear_path_templates()
    assert metrics.template_of("/jobs/42/lock") == "other"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("jobs/*", "absolute path"),
        ("/jobs//x", "no empty segments"),
        ("/jobs/", "no trailing"),
        ("/a/**/b", "only be the last segment"),
        ("/jobs/job-*", "mixes a wildcard"),
    ],
)
def test_bad_path_templates_say_what_a_template_is(
    templates: None, template: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        metrics.path_template(template)


def test_without_prometheus_client_recipes_record_nothing_and_enable_says_what_to_install(
    zk_hosts: str,
) -> None:
    """In a process where prometheus_client cannot be imported (as in the core venv)."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["prometheus_client"] = None  # as if not installed
        import zk_recipes
        from zk_recipes import Lock, ZkClient, metrics
        from zk_recipes import _metrics
        assert "prometheus_client" not in [m for m in sys.modules if sys.modules[m]]
        assert not metrics.is_enabled() and _metrics.sink is None
        assert metrics.registry() is None
        metrics.path_template("/jobs/{{job}}", name="jobs")
        assert metrics.template_of("/jobs/1") == "jobs"
        metrics.define_counter("zk_recipes_test_total", "help", ["task"]).inc(task="t")
        try:
            metrics.enable()
        except ImportError as exc:
            assert "pip install 'zk-recipes[metrics]'" in str(exc), exc
        else:
            raise AssertionError("enable() without prometheus-client")
        with ZkClient({zk_hosts!r}, namespace="/zk-recipes-test-nometrics") as client:
            lock = Lock(client, "/jobs/1")
            for _ in range(3):
                with lock:
                    pass
            assert not lock.acquire(blocking=True, timeout=0) or lock.release() is None
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "integrations")])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- locks and leases ----------------------------------------------------------------------


def test_contended_lock_records_wait_hold_busy_timeout_and_acquisitions(
    registry: Any, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.path_template("/m/{name}", name="m")
    holder = Lock(zk_client_factory(), "/m/contended")
    waiter = Lock(zk_client_factory(), "/m/contended")
    assert holder.acquire()
    with caplog.at_level(logging.DEBUG, logger="zk_recipes.lock"):
        assert not waiter.acquire(blocking=False)
        assert not waiter.acquire(timeout=0.2)
    assert lock_value(registry, "zk_recipes_lock_busy_total") == 1
    assert lock_value(registry, "zk_recipes_lock_timeouts_total") == 1
    (busy,) = records(caplog, "lock.busy")
    assert busy.levelno == logging.DEBUG
    assert (busy.zk_recipe, busy.zk_path) == ("Lock", "/m/contended")
    (timeout,) = records(caplog, "lock.timeout")
    assert timeout.levelno == logging.INFO

    acquired = threading.Event()

    def wait_turn() -> None:
        assert waiter.acquire(timeout=10)
        acquired.set()

    thread = threading.Thread(target=wait_turn)
    thread.start()
    # Held until the waiter is in line, then 0.3 s more: however late the thread
    # starts, its wait lasts at least that long.
    wait_until(lambda: len(holder.contenders()) == 2, "the waiter queued")
    time.sleep(0.3)
    holder.release()
    assert acquired.wait(10)
    thread.join(5)
    waiter.release()

    assert lock_value(registry, "zk_recipes_lock_acquisitions_total") == 2
    assert lock_value(registry, "zk_recipes_lock_wait_seconds_count") == 2
    assert lock_value(registry, "zk_recipes_lock_wait_seconds_sum") >= 0.25
    assert lock_value(registry, "zk_recipes_lock_hold_seconds_count") == 2
    assert lock_value(registry, "zk_recipes_lock_hold_seconds_sum") >= 0.25
    assert lock_value(registry, "zk_recipes_lock_lost_total") == 0
    # Labelled by template, never by the raw path.
    assert (
        registry.get_sample_value(
            "zk_recipes_lock_acquisitions_total", {"recipe": "Lock", "template": "/m/contended"}
        )
        is None
    )


def test_a_path_without_template_is_labelled_other_and_reentry_is_one_hold(
    registry: Any, zk_client: ZkClient
) -> None:
    lock = RLock(zk_client, "/untemplated/x")
    with lock, lock:
        pass
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", "RLock", "other") == 1
    assert lock_value(registry, "zk_recipes_lock_hold_seconds_count", "RLock", "other") == 1


def test_lock_lost_with_its_session_is_counted_and_logged(
    registry: Any, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.path_template("/m/**", name="m")
    client = zk_client_factory()
    lock = Lock(client, "/m/lost")
    assert lock.acquire()
    token, session = lock.fencing_token, client.session_id
    with caplog.at_level(logging.INFO, logger="zk_recipes"):
        expire_session(client)
        assert lock.lost.wait(10)
        wait_until(lambda: records(caplog, "lock.lost"), "the loss logged")
        # The client decides LOST, hands it to listeners (the lock), then says it: the
        # lock's line can come first, so wait for the client's own line too.
        wait_until(
            lambda: [r for r in records(caplog, "client.state") if r.zk_state == "LOST"],
            "the client's LOST logged",
        )
    assert lock_value(registry, "zk_recipes_lock_lost_total") == 1
    (lost,) = records(caplog, "lock.lost")
    assert lost.levelno == logging.WARNING
    fields = {k: v for k, v in vars(lost).items() if k.startswith("zk_")}
    assert fields == {
        "zk_event": "lock.lost",
        "zk_recipe": "Lock",
        "zk_path": "/m/lost",
        "zk_node": lock.node,
        "zk_session_id": f"{session:#x}",
        "zk_token": token,
    }
    states = [r for r in records(caplog, "client.state") if r.zk_state == "LOST"]
    assert states
    assert states[0].levelno == logging.WARNING
    assert states[0].zk_session_id == f"{session:#x}"
    assert states[0].zk_simulated is False
    lock.release()


def test_closing_the_client_ends_a_hold_without_counting_a_loss(
    registry: Any, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.path_template("/m/**", name="m")
    client = zk_client_factory()
    lock = Lock(client, "/m/closed")
    assert lock.acquire()
    with caplog.at_level(logging.INFO, logger="zk_recipes"):
        client.close()
        assert lock.lost.wait(10)
        wait_until(lambda: records(caplog, "lock.closed"), "the end logged")
    assert lock_value(registry, "zk_recipes_lock_lost_total") == 0
    assert not records(caplog, "lock.lost")


def test_semaphore_leases_and_read_write_halves_have_their_own_recipe_label(
    registry: Any, zk_client_factory: ClientFactory
) -> None:
    metrics.path_template("/m/{name}", name="m")
    sem = Semaphore(zk_client_factory(), "/m/pool", max_leases=2)
    other = Semaphore(zk_client_factory(), "/m/pool", max_leases=2)
    leases = sem.acquire_leases(2)
    assert not other.acquire(blocking=False)
    assert not other.acquire(timeout=0.2)
    for lease in leases:
        lease.close()
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", "Semaphore") == 2
    assert lock_value(registry, "zk_recipes_lock_wait_seconds_count", "Semaphore") == 1
    assert lock_value(registry, "zk_recipes_lock_hold_seconds_count", "Semaphore") == 2
    assert lock_value(registry, "zk_recipes_lock_busy_total", "Semaphore") == 1
    assert lock_value(registry, "zk_recipes_lock_timeouts_total", "Semaphore") == 1
    # The semaphore's internal mutex records nothing of its own.
    assert (
        value(registry, "zk_recipes_lock_acquisitions_total", recipe="Lock", template="other") == 0
    )

    mutex = SemaphoreMutex(zk_client_factory(), "/m/mutex")
    with mutex:
        pass
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", "SemaphoreMutex") == 1

    rw = ReadWriteLock(zk_client_factory(), "/m/rw")
    with rw.write_lock:
        pass
    with rw.read_lock:
        pass
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", "WriteLock") == 1
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", "ReadLock") == 1


def test_disable_stops_recording_and_enable_resumes(registry: Any, zk_client: ZkClient) -> None:
    lock = Lock(zk_client, "/off")
    metrics.disable()
    assert not metrics.is_enabled()
    with lock:
        pass
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", template="other") == 0
    metrics.enable(registry)
    assert metrics.registry() is registry
    with lock:
        pass
    assert lock_value(registry, "zk_recipes_lock_acquisitions_total", template="other") == 1


# -- leadership ----------------------------------------------------------------------------


def test_latch_leadership_gained_and_lost_with_the_session(
    registry: Any, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.path_template("/elect/*", name="election")
    first_client = zk_client_factory()
    first = LeaderLatch(first_client, "/elect/latch", "first").start()
    assert first.await_leadership(10)
    second = LeaderLatch(zk_client_factory(), "/elect/latch", "second").start()
    with caplog.at_level(logging.INFO, logger="zk_recipes.leader"):
        expire_session(first_client)
        assert second.await_leadership(10)
        wait_until(lambda: records(caplog, "leader.lost"), "the loss logged")

    def of(name: str) -> float:
        return value(registry, name, recipe="LeaderLatch", template="election")

    assert of("zk_recipes_leadership_gained_total") >= 2
    assert of("zk_recipes_leadership_lost_total") == 1
    (lost,) = records(caplog, "leader.lost")
    assert (lost.zk_recipe, lost.zk_path) == ("LeaderLatch", "/elect/latch")
    assert isinstance(lost.zk_token, int)
    gained = records(caplog, "leader.gained")
    assert gained
    assert gained[-1].zk_token == second.fencing_token
    first.close()
    second.close()  # leaving is no loss
    assert of("zk_recipes_leadership_lost_total") == 1


def test_selector_leadership_gained_and_lost(
    registry: Any, zk_client_factory: ClientFactory
) -> None:
    metrics.path_template("/elect/*", name="election")
    client = zk_client_factory()
    started = threading.Event()

    def lead(ctx: LeadershipContext) -> None:
        started.set()
        ctx.cancelled.wait(30)

    selector = LeaderSelector(client, "/elect/selector", lead, auto_requeue=True).start()
    assert started.wait(10)
    started.clear()
    expire_session(client)
    assert started.wait(15)  # it leads again on the new session

    def of(name: str) -> float:
        return value(registry, name, recipe="LeaderSelector", template="election")

    selector.close()
    assert of("zk_recipes_leadership_gained_total") == 2
    assert of("zk_recipes_leadership_lost_total") == 1
    # The selector's lock is leadership, not a lock of its own.
    assert (
        value(registry, "zk_recipes_lock_acquisitions_total", recipe="Lock", template="election")
        == 0
    )


# -- the client ----------------------------------------------------------------------------


def test_connection_state_gauge_and_transitions(
    registry: Any, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    def changes(state: str) -> float:
        return value(registry, "zk_recipes_connection_state_changes_total", state=state)

    def clients(state: str) -> float:
        return value(registry, "zk_recipes_connection_state", state=state)

    connected = clients("CONNECTED") + clients("RECONNECTED")
    with caplog.at_level(logging.INFO, logger="zk_recipes.client"):
        client = zk_client_factory()
        recorder = StateRecorder()
        client.add_listener(recorder)
        assert changes("CONNECTED") >= 1
        assert clients("CONNECTED") + clients("RECONNECTED") == connected + 1
        before_lost = changes("LOST")
        expire_session(client)
        recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
        assert changes("LOST") == before_lost + 1
        assert changes("RECONNECTED") >= 1
        assert clients("CONNECTED") + clients("RECONNECTED") == connected + 1
        session = client.session_id
        client.close()
        assert said(10)  # the client's state records come through the log writer
    assert clients("CONNECTED") + clients("RECONNECTED") == connected
    assert changes("CLOSED") >= 1
    closed = [r for r in records(caplog, "client.state") if r.zk_state == "CLOSED"]
    assert closed[-1].zk_session_id == f"{session:#x}"
    assert closed[-1].levelno == logging.INFO


def test_simulated_expiry_is_counted_and_logged(
    registry: Any,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=3.0, simulated_expiry_fraction=0.5
    )
    recorder = StateRecorder()
    client.add_listener(recorder)
    before = value(registry, "zk_recipes_simulated_expirations_total")
    session = client.session_id
    with caplog.at_level(logging.INFO, logger="zk_recipes.client"):
        zk_proxy.blackhole()
        lost = recorder.wait_for(ConnectionState.LOST, timeout=10)
        zk_proxy.heal()
        recorder.wait_for(ConnectionState.RECONNECTED, timeout=15)
        assert said(10)  # the client's state records come through the log writer
    assert lost.simulated
    assert value(registry, "zk_recipes_simulated_expirations_total") == before + 1
    (expiry,) = records(caplog, "client.simulated_expiry")
    assert expiry.levelno == logging.WARNING
    assert expiry.zk_session_id == f"{session:#x}"
    assert expiry.zk_silent_s >= 1.5
    (state,) = [r for r in records(caplog, "client.state") if r.zk_state == "LOST"]
    assert state.zk_simulated is True


def test_guaranteed_deletes_pending_gauge_and_logs(
    registry: Any,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=10.0, simulated_expiry_fraction=0.9
    )
    recorder = StateRecorder()
    client.add_listener(recorder)
    lock = Lock(client, "/deletes")
    assert lock.acquire()
    node = lock.node

    def pending() -> float:
        return value(registry, "zk_recipes_guaranteed_deletes_pending")

    before = pending()
    with caplog.at_level(logging.INFO, logger="zk_recipes.client"):
        zk_proxy.cut()
        recorder.wait_for(ConnectionState.SUSPENDED, timeout=10)
        lock.release()  # the delete cannot be sent now: it waits in the background
        assert pending() == before + 1
        zk_proxy.heal()
        assert client.wait_for_deletes(10)
        wait_until(lambda: records(caplog, "delete.done"), "the delete logged")
    assert pending() == before
    (queued,) = records(caplog, "delete.queued")
    assert queued.zk_path == node
    assert queued.zk_session_id == f"{client.session_id:#x}"
    (done,) = records(caplog, "delete.done")
    assert done.zk_path == node
    assert lock_value(registry, "zk_recipes_lock_hold_seconds_count", template="other") == 1


def test_every_metric_is_documented() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    for name, (kind, labels, _) in metrics.METRICS.items():
        assert f"`{name}`" in text, name
        assert kind in text
        for label in labels:
            assert f"`{label}`" in text


def test_an_app_without_logging_set_up_gets_no_warning_on_stderr() -> None:
    """The ``zk_recipes`` logger has a NullHandler: Python's last-resort handler stays quiet."""
    import subprocess
    import sys

    program = (
        "import logging, zk_recipes\n"
        "logging.getLogger('zk_recipes.client').warning('ZooKeeper state SUSPENDED')\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (0, "")
