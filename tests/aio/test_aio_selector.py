"""aio.LeaderSelector against a real server: a coroutine leads; leadership in question cancels it.

One leader at a time among asyncio and sync selectors on one path; closing
the leader cancels its term's task and hands over; a session lost while
leading cancels the term (CancelledError inside it, its reason known); a
plain function is refused with the fix.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from tests.aio.loops import run_on
from zk_recipes import LeaderSelector, LeadershipContext, WrongTypeError, ZkClient, aio
from zk_recipes.testing import expire_session, wait_for_children, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

PATH = "/aio/selector"


def test_one_leader_at_a_time_and_closing_hands_over(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    async def main() -> None:
        leading: list[str] = []
        ended: list[str] = []
        started = asyncio.Event()

        def term(name: str) -> Callable[[LeadershipContext], Awaitable[None]]:
            async def take_leadership(ctx: LeadershipContext) -> None:
                leading.append(name)
                started.set()
                try:
                    await asyncio.Event().wait()  # until leadership is in question
                finally:
                    ended.append(f"{name}: {ctx.reason}")

            return take_leadership

        first = aio.LeaderSelector(zk_client_factory(), PATH, term("first"))
        second = aio.LeaderSelector(zk_client_factory(), PATH, term("second"))
        async with first:
            await asyncio.wait_for(started.wait(), 10)
            started.clear()
            async with second:
                await asyncio.to_thread(wait_for_children, second.client, PATH, 2)
                assert leading == ["first"]
                assert first.has_leadership()
                assert not second.has_leadership()
                assert [p.is_leader for p in await second.participants()] == [True, False]
                await first.close()  # the term's task is cancelled, then the lock released
                assert ended == ["first: closed"]
                await asyncio.wait_for(started.wait(), 10)
                assert leading == ["first", "second"]
                assert second.statistics().terms == 1
        assert ended == ["first: closed", "second: closed"]

    run_on(loop, main())


def test_a_lost_session_cancels_the_term_and_the_rival_leads(
    zk_client_factory: ClientFactory,
) -> None:
    """The session expired on the server: the term's task is cancelled (its handler sees why),
    and the rival leads. (Expired by the server, the rival may lead before our client hears:
    being told first is the partition's guarantee, tests/leader/, not an expiry's.)"""
    leader_client, rival_client = zk_client_factory(), zk_client_factory()
    rival_led = threading.Event()

    def rival_term(ctx: LeadershipContext) -> None:
        rival_led.set()
        ctx.cancelled.wait()

    rival = LeaderSelector(rival_client, PATH, rival_term)

    async def main() -> None:
        entered = asyncio.Event()
        reasons: list[str | None] = []

        async def take_leadership(ctx: LeadershipContext) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                reasons.append(ctx.reason)
                raise

        async with aio.LeaderSelector(leader_client, PATH, take_leadership) as selector:
            await asyncio.wait_for(entered.wait(), 10)
            rival.start()
            await asyncio.to_thread(wait_for_children, rival_client, PATH, 2)
            await asyncio.to_thread(expire_session, leader_client)
            assert await asyncio.to_thread(rival_led.wait, 20)
            await asyncio.to_thread(wait_until, lambda: reasons, "our term cancelled", 20)
            assert not selector.has_leadership()
        assert reasons in (["LOST"], ["SUSPENDED"])  # the expiry, or the cut before it

    try:
        asyncio.run(main())
    finally:
        rival.close()


def test_a_plain_function_is_refused_with_the_fix(zk_client: ZkClient) -> None:
    with pytest.raises(WrongTypeError, match="coroutine function"):
        aio.LeaderSelector(zk_client, PATH, lambda ctx: None)  # type: ignore[arg-type, return-value]
