"""LeaderSelector: turns across processes never overlap; cancellation reaches the leader."""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.synchronize
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zk_recipes import (
    ConnectionState,
    ErrorPolicy,
    LeaderSelector,
    LeadershipContext,
    NoNodeError,
    RecipeUsageError,
    ZkClient,
)
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

NODE_NAME = re.compile(r"_c_[0-9a-f-]{36}-lock-\d{10}")


class Terms:
    """A take_leadership that records its terms; ``hold`` makes it wait for cancellation."""

    def __init__(self, *, hold: bool = True, limit: float = 30.0) -> None:
        self.hold = hold
        self.limit = limit
        self._cond = threading.Condition()
        self.started: list[LeadershipContext] = []
        #: (ctx, reason seen when the term ended, time.monotonic() of the end)
        self.ended: list[tuple[LeadershipContext, str | None, float]] = []
        self.cancel_calls: list[LeadershipContext] = []

    def __call__(self, ctx: LeadershipContext) -> None:
        with self._cond:
            self.started.append(ctx)
            self._cond.notify_all()
        if self.hold:
            ctx.cancelled.wait(self.limit)
        with self._cond:
            self.ended.append((ctx, ctx.reason, time.monotonic()))
            self._cond.notify_all()

    def on_cancel(self, ctx: LeadershipContext) -> None:
        with self._cond:
            self.cancel_calls.append(ctx)
            self._cond.notify_all()

    def wait(self, what: Callable[[], bool], timeout: float = 10.0) -> None:
        with self._cond:
            assert self._cond.wait_for(what, timeout), "condition not reached in time"

    def wait_started(self, count: int = 1, timeout: float = 10.0) -> LeadershipContext:
        self.wait(lambda: len(self.started) >= count, timeout)
        return self.started[count - 1]

    def wait_ended(self, count: int = 1, timeout: float = 10.0) -> tuple[str | None, float]:
        self.wait(lambda: len(self.ended) >= count, timeout)
        _, reason, at = self.ended[count - 1]
        return reason, at


def _in_line(client: ZkClient, path: str) -> int:
    try:
        return len(client.get_children(path))
    except NoNodeError:
        return 0


# -- four processes ---------------------------------------------------------------------


def _selector_child(
    hosts: str,
    namespace: str,
    ident: str,
    log_path: str,
    ready: multiprocessing.synchronize.Barrier,
    stop: multiprocessing.synchronize.Event,
) -> None:
    """Child process: auto-requeueing selector; log every term; close when told."""
    with (
        open(log_path, "a", buffering=1) as log,
        ZkClient(
            hosts, namespace=namespace, session_timeout=10.0, connection_timeout=10.0
        ) as client,
    ):

        def take_leadership(ctx: LeadershipContext) -> None:
            start = time.monotonic_ns()
            ctx.cancelled.wait(0.01)  # a short piece of work
            log.write(f"{ctx.fencing_token} {start} {time.monotonic_ns()}\n")

        selector = LeaderSelector(
            client, "/turns", take_leadership, identifier=ident, auto_requeue=True
        )
        ready.wait(60)
        selector.start()
        stop.wait(120)
        selector.close()


@pytest.mark.slow
def test_four_processes_take_turns_and_never_overlap(
    zk_hosts: str, zk_namespace: str, tmp_path: Path
) -> None:
    count, terms = 4, 50
    context = multiprocessing.get_context("spawn")
    logs = [tmp_path / f"child-{i}.log" for i in range(count)]
    ready, stop = context.Barrier(count + 1), context.Event()
    children = [
        context.Process(
            target=_selector_child,
            args=(zk_hosts, zk_namespace, f"s{i}", str(logs[i]), ready, stop),
            daemon=True,
        )
        for i in range(count)
    ]
    for child in children:
        child.start()
    try:
        ready.wait(60)  # every child connected: they start competing together

        def done() -> int:
            return sum(len(log.read_text().splitlines()) for log in logs if log.exists())

        wait_until(lambda: done() >= terms, f"{terms} terms", timeout=60)
        stop.set()
        for child in children:
            child.join(30)
            assert child.exitcode == 0
    finally:
        stop.set()
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(5)

    sections = sorted(
        (int(start), int(end), int(token), index)
        for index, log in enumerate(logs)
        for token, start, end in (line.split() for line in log.read_text().splitlines())
    )
    assert len(sections) >= terms
    for (_, prev_end, prev_token, _), (start, _, token, _) in itertools.pairwise(sections):
        assert start >= prev_end, "two leaders at once"
        assert token > prev_token, "fencing tokens must grow from term to term"
    assert {index for *_, index in sections} == set(range(count)), "someone never led"


# -- cancellation -----------------------------------------------------------------------


def test_suspended_cancels_the_leader_within_the_read_timeout(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    session_timeout = 4.0
    client = zk_client_factory(
        hosts=zk_proxy.connect_string,
        session_timeout=session_timeout,
        simulated_expiry_fraction=0.9,
    )
    states = StateRecorder()
    client.add_listener(states)
    terms = Terms()
    selector = LeaderSelector(
        client, "/cut", terms, auto_requeue=True, on_cancel=terms.on_cancel
    ).start()
    ctx = terms.wait_started()
    assert selector.has_leadership()
    mark = states.mark()

    zk_proxy.cut()
    # kazoo's read timeout (2/3 of the session) bounds how late SUSPENDED can come.
    assert ctx.cancelled.wait(session_timeout * 2 / 3), "take_leadership was not cancelled"
    assert ctx.reason == "SUSPENDED"
    assert terms.wait_ended()[0] == "SUSPENDED"
    assert not selector.has_leadership()
    terms.wait(lambda: terms.cancel_calls == [ctx])

    zk_proxy.heal()
    states.wait_for(ConnectionState.RECONNECTED, after=mark)
    second = terms.wait_started(2, timeout=15)  # auto_requeue: it competes again
    assert second.term == 2
    assert second.fencing_token > ctx.fencing_token
    assert selector.has_leadership()
    selector.close()
    assert terms.wait_ended(2)[0] == "closed"


def test_close_while_leading_cancels_the_term_and_deletes_the_node(
    zk_client: ZkClient,
) -> None:
    terms = Terms()
    selector = LeaderSelector(zk_client, "/close", terms, on_cancel=terms.on_cancel).start()
    ctx = terms.wait_started()
    assert zk_client.exists(ctx.node) is not None
    selector.close()
    # close() waited for take_leadership to return, then released the lock.
    assert len(terms.ended) == 1
    assert ctx.reason == "closed"
    assert not selector.has_leadership()
    assert zk_client.exists(ctx.node) is None
    terms.wait(lambda: terms.cancel_calls == [ctx])
    selector.close()  # idempotent
    assert selector.statistics().state == "closed"


def test_session_policy_rides_out_suspended_but_not_lost(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
    )
    states = StateRecorder()
    client.add_listener(states)
    terms = Terms()
    selector = LeaderSelector(
        client, "/session", terms, auto_requeue=True, error_policy=ErrorPolicy.SESSION
    ).start()
    ctx = terms.wait_started()
    mark = states.mark()
    zk_proxy.cut()
    states.wait_for(ConnectionState.SUSPENDED, after=mark)
    assert not ctx.cancelled.wait(0.3)
    assert selector.has_leadership()
    zk_proxy.heal()
    states.wait_for(ConnectionState.RECONNECTED, after=mark)
    assert not ctx.cancelled.is_set()

    # Now a real expiry on the server: LOST cancels the term, and a new one follows.
    expire_session(client, hosts=zk_proxy.connect_string)
    assert ctx.cancelled.wait(10)
    assert ctx.reason == "LOST"
    second = terms.wait_started(2, timeout=15)
    assert second.fencing_token > ctx.fencing_token
    selector.close()


def test_deleting_the_leaders_node_cancels_its_term(zk_client_factory: ClientFactory) -> None:
    admin = zk_client_factory()
    terms = Terms()
    selector = LeaderSelector(zk_client_factory(), "/gone", terms).start()
    ctx = terms.wait_started()
    admin.delete(ctx.node)
    assert ctx.cancelled.wait(10)
    assert ctx.reason == "node deleted"
    terms.wait_ended()
    selector.close()


@pytest.mark.slow
def test_session_policy_notices_a_deleted_node_after_a_reconnect(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    # kazoo drops the node watch on a disconnect; on the same session the
    # term rightly goes on, and a deletion afterwards must still cancel it.
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    admin = zk_client_factory(hosts=zk_private_server.connect_string)
    states = StateRecorder()
    client.add_listener(states)
    terms = Terms()
    selector = LeaderSelector(client, "/rearm", terms, error_policy=ErrorPolicy.SESSION).start()
    ctx = terms.wait_started()
    session = client.session_id
    mark = states.mark()
    zk_proxy.cut()
    states.wait_for(ConnectionState.SUSPENDED, after=mark)
    time.sleep(0.3)
    zk_proxy.heal()
    states.wait_for(ConnectionState.RECONNECTED, after=mark)
    assert client.session_id == session
    assert not ctx.cancelled.wait(0.5)
    assert selector.has_leadership()
    deleted_at = time.monotonic()
    admin.delete(ctx.node)
    assert ctx.cancelled.wait(1.0), "the deletion went unnoticed after the reconnect"
    assert time.monotonic() - deleted_at < 1.0
    assert ctx.reason in ("node deleted", "LOST")
    assert not selector.has_leadership()
    selector.close()


def test_closing_the_client_cancels_a_running_term_within_a_second(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    terms = Terms()
    selector = LeaderSelector(client, "/client-closed", terms).start()
    ctx = terms.wait_started()
    closed_at = time.monotonic()
    client.close()
    assert not selector.has_leadership()
    assert ctx.cancelled.wait(1.0)
    assert time.monotonic() - closed_at < 1.0
    assert ctx.reason == "closed"
    selector.close()


# -- requeue, participants, errors ------------------------------------------------------


def test_without_auto_requeue_it_leads_once_until_requeued(zk_client: ZkClient) -> None:
    terms = Terms(hold=False)
    selector = LeaderSelector(zk_client, "/once", terms).start()
    terms.wait_ended(1)
    wait_until(lambda: not selector.statistics().queued, "idle after one term")
    time.sleep(0.2)
    assert len(terms.started) == 1
    assert selector.requeue() is True
    terms.wait_ended(2)
    assert terms.started[1].term == 2
    selector.close()
    with pytest.raises(RecipeUsageError, match="not started"):
        selector.requeue()


def test_requeue_while_queued_returns_false(zk_client_factory: ClientFactory) -> None:
    holder_terms, waiter_terms = Terms(), Terms(hold=False)
    holder = LeaderSelector(zk_client_factory(), "/queued", holder_terms).start()
    holder_terms.wait_started()
    waiter = LeaderSelector(zk_client_factory(), "/queued", waiter_terms).start()
    wait_until(lambda: waiter.statistics().queued, "waiter queued")
    assert waiter.requeue() is False
    assert not waiter.has_leadership()
    holder.close()
    waiter_terms.wait_ended()
    waiter.close()


def test_participants_ids_and_node_layout(zk_client_factory: ClientFactory) -> None:
    admin = zk_client_factory()
    alpha_terms = Terms()
    alpha = LeaderSelector(zk_client_factory(), "/ids", alpha_terms, identifier="alpha").start()
    alpha_ctx = alpha_terms.wait_started()
    beta_terms = Terms()
    beta = LeaderSelector(zk_client_factory(), "/ids", beta_terms, identifier="beta").start()
    wait_until(lambda: _in_line(admin, "/ids") == 2, "beta in line")
    for selector in (alpha, beta):
        assert [(p.id, p.is_leader) for p in selector.participants()] == [
            ("alpha", True),
            ("beta", False),
        ]
    leader = beta.leader()
    assert leader is not None
    assert leader.node == alpha_ctx.node
    assert NODE_NAME.fullmatch(alpha_ctx.node.rsplit("/", 1)[1])
    data, stat = admin.get(alpha_ctx.node)
    assert data == b"alpha"
    assert stat.czxid == alpha_ctx.fencing_token
    assert alpha.has_leadership()
    assert not beta.has_leadership()
    alpha.close()
    beta_ctx = beta_terms.wait_started()
    assert beta.has_leadership()
    assert beta_ctx.fencing_token > alpha_ctx.fencing_token
    beta.close()


def test_take_leadership_raising_gives_up_and_auto_requeue_goes_on(
    zk_client: ZkClient,
) -> None:
    calls: list[int] = []
    second = threading.Event()

    def take_leadership(ctx: LeadershipContext) -> None:
        calls.append(ctx.term)
        if ctx.term == 1:
            raise RuntimeError("boom (expected by the test)")
        second.set()
        ctx.cancelled.wait(10)

    selector = LeaderSelector(zk_client, "/raises", take_leadership, auto_requeue=True).start()
    assert second.wait(10)
    assert calls == [1, 2]
    assert selector.has_leadership()
    selector.close()


def test_misuse_fails_at_once(zk_client: ZkClient) -> None:
    with pytest.raises(TypeError):
        LeaderSelector(zk_client, "/misuse", "not callable")  # type: ignore[arg-type]
    selector = LeaderSelector(zk_client, "/misuse", Terms(hold=False))
    with pytest.raises(RecipeUsageError, match="not started"):
        selector.requeue()
    with selector, pytest.raises(RecipeUsageError, match="already started"):
        selector.start()
    with pytest.raises(RecipeUsageError, match="already closed"):
        selector.start()
