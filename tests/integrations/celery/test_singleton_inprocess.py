"""@singleton_task in one process: eager mode and direct calls, keys, policies, misuse.

Real ZooKeeper, no broker: ``task_always_eager`` runs tasks in the caller, through
the same code path as a worker.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait as futures_wait
from typing import Any, Literal

import pytest
from celery import Celery, beat as celery_beat

import zk_recipes_celery as zc
from zk_recipes import (
    ConfigurationError,
    Lock,
    LockLost,
    NoNodeError,
    Owner,
    RecipeUsageError,
    ZkClient,
    metrics,
)
from zk_recipes.testing import expire_session, wait_until
from zk_recipes_celery import SingletonBusy, SingletonTask, current_singleton, singleton_task


def _in_threads(app: Celery, n: int, fn: Any) -> list[Any]:
    # Bind the app's tasks first: Celery's lazy first binding is not thread-safe.
    app.finalize(auto=True)
    results: list[Any] = [None] * n
    start = threading.Barrier(n)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def _children(client: ZkClient, path: str) -> list[str]:
    """Children of ``path``; none once the server reaped it (lock directories are CONTAINERs)."""
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


class _Gate:
    """Holds the first run inside its body until the test lets it go (no timing windows)."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        self.inside.set()
        assert self.release.wait(20), "the test never let the holding run go"


def _while_first_holds(
    app: Celery,
    gate: _Gate,
    n: int,
    fn: Any,
    waiting: Any = None,
) -> list[Any]:
    """``fn(0)`` enters its body and holds; then ``fn(1..n-1)`` run; then ``fn(0)`` ends.

    Others that block (``on_conflict="wait"``) are let go once ``waiting()`` is
    true; others that return at once are let go when they have. Returns each
    call's result or exception, in order.
    """
    app.finalize(auto=True)  # Celery's lazy first binding is not thread-safe

    def call(i: int) -> Any:
        try:
            return fn(i)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        first = pool.submit(call, 0)
        assert gate.inside.wait(20), "the first run never entered its body"
        others = [pool.submit(call, i) for i in range(1, n)]
        if waiting is not None:
            wait_until(waiting, "the other runs waiting for the lock", timeout=20)
        else:
            futures_wait(others, timeout=20)
        gate.release.set()
        return [f.result(30) for f in (first, *others)]


def test_eager_calls_lock_and_the_duplicate_is_skipped_with_a_signal(app: Celery) -> None:
    gate = _Gate()

    @app.task(name="t.slow")
    @singleton_task(skip_result="skipped")
    def slow(i: int) -> str:
        gate.hold()
        return "ran"

    heard: list[dict[str, Any]] = []

    def on_skip(sender: Any = None, **kwargs: Any) -> None:
        heard.append(kwargs)

    zc.singleton_skipped.connect(on_skip, weak=False)
    try:
        before = zc.counts().get(("singleton_skipped", "t.slow"), 0)
        results = _while_first_holds(app, gate, 3, lambda i: slow.apply_async((i,)).result)
    finally:
        zc.singleton_skipped.disconnect(on_skip)

    assert sorted(results) == ["ran", "skipped", "skipped"]
    assert zc.counts()[("singleton_skipped", "t.slow")] == before + 2
    assert len(heard) == 2
    assert heard[0]["key_path"] == "/celery/singleton/t.slow/task"
    holder = heard[0]["holder"]
    assert isinstance(holder, Owner)
    assert holder.pid is not None
    assert holder.pid > 0


def test_prometheus_counter_counts_skips(app: Celery) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")

    gate = _Gate()

    @app.task(name="t.prom")
    @singleton_task
    def prom() -> None:
        gate.hold()

    def sample() -> float:
        value = prometheus_client.REGISTRY.get_sample_value(
            "zk_recipes_celery_singleton_skipped_total", {"task": "t.prom"}
        )
        return value or 0.0

    before = sample()
    _while_first_holds(app, gate, 2, lambda i: prom.apply_async().result)
    assert sample() == before + 1


def test_counters_and_singleton_locks_record_in_the_core_registry(app: Celery) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    previous = metrics.registry()
    registry = prometheus_client.CollectorRegistry()
    metrics.enable(registry)
    try:
        gate = _Gate()

        @app.task(name="t.reg")
        @singleton_task
        def reg() -> None:
            gate.hold()

        _while_first_holds(app, gate, 2, lambda i: reg.apply_async().result)
        skipped = registry.get_sample_value(
            "zk_recipes_celery_singleton_skipped_total", {"task": "t.reg"}
        )
        acquired = registry.get_sample_value(
            "zk_recipes_lock_acquisitions_total",
            {"recipe": "Lock", "template": "celery_singleton"},
        )
    finally:
        if previous is None:
            metrics.disable()
        else:
            metrics.enable(previous)
    assert skipped == 1
    assert acquired is not None
    assert acquired >= 1


def test_keys_bind_arguments_so_equal_calls_share_one_lock(
    app: Celery, zk_client: ZkClient
) -> None:
    seen: list[str] = []

    @app.task(name="t.keyed", bind=True)
    @singleton_task(key=["account", "region"])
    def keyed(self: Any, account: int, region: str = "eu", verbose: bool = False) -> str:
        seen.append(current_singleton().key_path)
        return "ok"

    keyed(7)
    keyed(account=7, region="eu")
    keyed.apply_async((7,), {"verbose": True})
    keyed(8)
    keyed(7, "us")

    assert seen[0] == seen[1] == seen[2], "defaults applied; bound self and other args ignored"
    assert len({seen[0], seen[3], seen[4]}) == 3
    # Containers (the server reports their ephemeralOwner as 0, so watch them go):
    # the server removes the key directories once their runs are over.
    wait_until(
        lambda: _children(zk_client, "/celery/singleton/t.keyed") == [],
        "empty key directories reaped",
        timeout=10,
    )


def test_callable_key_and_values_without_canonical_json(app: Celery) -> None:
    @app.task(name="t.by_tenant")
    @singleton_task(key=lambda payload: payload["tenant"])
    def by_tenant(payload: dict[str, Any]) -> str:
        return current_singleton().key_path

    @app.task(name="t.opaque")
    @singleton_task(key=["thing"])
    def opaque(thing: object) -> None:
        pass

    assert by_tenant({"tenant": "a", "x": 1}) == by_tenant({"tenant": "a", "x": 2})
    assert by_tenant({"tenant": "a"}) != by_tenant({"tenant": "b"})
    with pytest.raises(RecipeUsageError, match="no canonical JSON form"):
        opaque(object())


@pytest.mark.parametrize("policy", ["raise", "wait"])
def test_raise_and_wait_policies(
    app: Celery, zk_client: ZkClient, policy: Literal["raise", "wait"]
) -> None:
    spans: list[tuple[float, float]] = []
    gate = _Gate()

    @app.task(name=f"t.{policy}")
    @singleton_task(on_conflict=policy, wait_timeout=10)
    def guarded(i: int) -> int:
        begin = time.monotonic()
        gate.hold()
        spans.append((begin, time.monotonic()))
        return i

    def both_in_line() -> bool:
        return len(zk_client.get_children(f"/celery/singleton/t.{policy}/task")) == 2

    results = _while_first_holds(
        app, gate, 2, guarded, waiting=both_in_line if policy == "wait" else None
    )

    if policy == "raise":
        busy = [r for r in results if isinstance(r, SingletonBusy)]
        assert len(busy) == 1
        pid = busy[0].holder.pid
        assert pid is not None
        assert pid > 0
    else:
        assert sorted(results) == [0, 1]
        (_, a1), (b0, _) = sorted(spans)
        assert a1 <= b0, "the waiting run starts after the first one ends"


def test_wait_timeout_raises_busy_and_leaves_no_contender(app: Celery, zk_client: ZkClient) -> None:
    @app.task(name="t.short_wait")
    @singleton_task(on_conflict="wait", wait_timeout=0.3)
    def short_wait() -> None:
        pass

    holder = Lock(zk_client, "/celery/singleton/t.short_wait/task")
    with holder:
        with pytest.raises(SingletonBusy, match=r"after waiting 0\.3s"):
            short_wait()
        assert len(zk_client.get_children("/celery/singleton/t.short_wait/task")) == 1


def test_retry_policy_in_eager_mode_raises_busy(app: Celery, zk_client: ZkClient) -> None:
    @app.task(name="t.retry_eager", bind=True)
    @singleton_task(on_conflict="retry")
    def retry_eager(self: Any) -> None:
        pass

    with Lock(zk_client, "/celery/singleton/t.retry_eager/task"), pytest.raises(SingletonBusy):
        retry_eager()


def test_every_exit_path_releases(app: Celery, zk_client: ZkClient) -> None:
    @app.task(name="t.fails")
    @singleton_task
    def fails() -> None:
        raise ValueError("boom")

    for _ in range(2):  # the second call would be skipped if the first kept the lock
        with pytest.raises(ValueError, match="boom"):
            fails()
    assert _children(zk_client, "/celery/singleton/t.fails/task") == []


def test_bypass_mode_does_not_lock_eager_calls(app: Celery) -> None:
    app.conf.zk_recipes_singleton_eager = "bypass"
    both_inside = threading.Barrier(2, timeout=10)

    @app.task(name="t.bypassed")
    @singleton_task
    def bypassed(i: int) -> bool:
        both_inside.wait()  # BrokenBarrierError unless both calls run at once
        return True

    assert _in_threads(app, 2, lambda i: bypassed(i)) == [True, True]


def test_fencing_tokens_increase_and_current_singleton_outside_a_task_fails(
    app: Celery,
) -> None:
    @app.task(name="t.token", base=SingletonTask)
    def token() -> int:
        return current_singleton().fencing_token

    assert token() < token() < token.apply_async().result
    with pytest.raises(RecipeUsageError, match="only available inside"):
        current_singleton()


def test_lost_flag_and_abort(app: Celery) -> None:
    outcomes: dict[str, Any] = {}

    @app.task(name="t.flag")
    @singleton_task
    def flag() -> bool:
        client = zc.get_client(app)
        expire_session(client)
        wait_until(lambda: current_singleton().lost, "lost flag set", timeout=10)
        with pytest.raises(LockLost):
            current_singleton().check()
        return current_singleton().lost

    expirers: list[threading.Thread] = []

    @app.task(name="t.abort")
    @singleton_task(on_lost="abort")
    def abort() -> None:
        # Expire from another thread: the abort lands at any bytecode of this one,
        # and must not cut expire_session's own cleanup short (a leaked client).
        expirer = threading.Thread(target=expire_session, args=(zc.get_client(app),))
        expirers.append(expirer)
        expirer.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # pure Python: interruptible at any bytecode
            pass
        outcomes["finished"] = True

    assert flag() is True
    with pytest.raises(zc.SingletonAborted):
        abort()
    for expirer in expirers:
        expirer.join(15)
    assert outcomes == {}, "the run was interrupted, not left to finish"


def test_misuse_fails_at_once(app: Celery) -> None:
    with pytest.raises(ConfigurationError, match="not parameters"):

        @singleton_task(key=["nope"])
        def bad_key(x: int) -> None:
            pass

    with pytest.raises(ConfigurationError, match="list of argument names"):
        singleton_task(key="x")

    # mypy refuses these at the call site (Literal types); untyped callers get the check.
    with pytest.raises(ConfigurationError, match="on_conflict"):
        singleton_task(on_conflict="queue")  # type: ignore[call-overload]

    with pytest.raises(ConfigurationError, match="on_lost"):
        singleton_task(on_lost="ignore")  # type: ignore[call-overload]

    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) \['on_conflit'\]"):
        singleton_task(on_conflit="wait")  # type: ignore[call-overload]

    def wrong_order() -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"UNDER @app\.task"):
        singleton_task(app.task(name="t.wrong_order")(wrong_order))

    @app.task(name="t.body")
    @singleton_task
    def body() -> None:
        pass

    with pytest.raises(RecipeUsageError, match=r"not task\.run"):
        body.run()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        # Not {}: where the Django tests configured Django in this process, an empty Celery
        # configuration takes Django's ZK_RECIPES (test_django_settings.py checks both).
        ({"zk_recipes_namespace": "jobs"}, "zk_recipes_hosts is not set"),
        ({"zk_recipes_hosts": "zk1:2181;zk2:2181"}, "separate them with commas"),
        ({"zk_recipes_hosts": "h:1", "zk_recipes_prefix": "celery"}, "absolute znode path"),
        ({"zk_recipes_hosts": "h:1", "zk_recipes_singleton_eager": "yes"}, "one of"),
        ({"zk_recipes_hosts": "h:1", "zk_recipes_client_options": {"bogus": 1}}, "bogus"),
        ({"zk_recipes_hosts": "h:1", "zk_recipes_session_timeout": -1}, "session_timeout"),
    ],
)
def test_bad_settings_name_the_setting(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        zc.read_config(conf)


def test_celery_namespace_for_django_settings() -> None:
    app = Celery("dj", set_as_current=False)
    app.config_from_object(
        {"CELERY_ZK_RECIPES_HOSTS": "zk1:2181", "CELERY_ZK_RECIPES_PREFIX": "/jobs"},
        namespace="CELERY",
    )
    config = zc.read_config(app.conf, app_name=app.main)
    assert config.client.hosts == "zk1:2181"
    assert config.singleton_root == "/jobs/singleton"
    assert config.beat_path == "/jobs/beat/dj"
    app.close()


def test_leader_only_gate_in_the_scheduler(
    app: Celery, zk_client: ZkClient, zk_namespace: str
) -> None:
    from celery import beat
    from celery.beat import ScheduleEntry

    from zk_recipes import LeaderLatch
    from zk_recipes_celery._beat_election import BeatRole, beat_election
    from zk_recipes_celery.beat import is_leader_only, leader_only

    sent: list[str] = []

    @app.task(name="t.report")
    @leader_only
    def report() -> None:
        sent.append("report")

    @app.task(name="t.flagged", zk_leader_only=True)
    def flagged() -> None:
        sent.append("flagged")

    @app.task(name="t.free")
    def free() -> None:
        sent.append("free")

    assert is_leader_only(report)
    assert is_leader_only(flagged)
    assert not is_leader_only(free)

    scheduler = beat.Scheduler(app=app, lazy=True)
    entries = [ScheduleEntry(name=n, task=f"t.{n}", app=app) for n in ("report", "flagged", "free")]
    incumbent = LeaderLatch(zk_client, "/celery/beat/t", "incumbent").start()
    assert incumbent.await_leadership(10)
    before = zc.counts().get(("beat_dropped", "t.report"), 0)

    for entry in entries:  # another beat leads: only the ungated task goes out (eagerly here)
        scheduler.apply_entry(entry)
    assert sent == ["free"]
    assert zc.counts()[("beat_dropped", "t.report")] == before + 1

    incumbent.close()
    election = beat_election(app)
    wait_until(lambda: election.role() is BeatRole.LEADER, "this beat leads", timeout=10)
    for entry in entries:  # now this process leads
        scheduler.apply_entry(entry)
    assert sent == ["free", "report", "flagged", "free"]


class _CustomScheduler(celery_beat.PersistentScheduler):  # type: ignore[misc]
    """Stands in for django-celery-beat's DatabaseScheduler in the wrapping test."""


def test_leader_scheduler_wraps_the_configured_scheduler(app: Celery, tmp_path: Any) -> None:
    from zk_recipes_celery.beat import LeaderGate, LeaderScheduler, leader_gated

    app.conf.zk_recipes_beat_scheduler = f"{__name__}:_CustomScheduler"
    scheduler = LeaderScheduler(app=app, schedule_filename=str(tmp_path / "s"), lazy=True)

    assert isinstance(scheduler, _CustomScheduler)
    assert isinstance(scheduler, LeaderGate)
    assert type(scheduler) is leader_gated(_CustomScheduler)
    assert (
        leader_gated(celery_beat.PersistentScheduler).__name__ == "LeaderGatedPersistentScheduler"
    )


def test_key_names_caught_by_var_kwargs(app: Celery) -> None:
    @app.task(name="t.flexible")
    @singleton_task(key=["tenant"])
    def flexible(job: str, **options: Any) -> str:
        return current_singleton().key_path

    tenant_a = flexible("x", tenant="a")
    assert flexible("y", tenant="a", verbose=True) == tenant_a
    assert flexible("x", tenant="b") != tenant_a
    assert flexible("x") != flexible("x", tenant=None), "absent differs from an explicit None"


def test_singleton_task_attributes_change_only_the_options_they_name(app: Celery) -> None:
    from zk_recipes_celery._singleton_options import SingletonOptions

    @app.task(
        name="t.attrs", base=SingletonTask, singleton_on_conflict="raise", singleton_wait_timeout=3
    )
    def attrs() -> None:
        pass

    assert attrs._options() == SingletonOptions(on_conflict="raise", wait_timeout=3)
