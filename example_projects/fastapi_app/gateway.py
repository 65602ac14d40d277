"""A stand-in payment gateway for the quick start: it records each charge with its token.

A real gateway would refuse a charge whose fencing token is older than the
last one it saw for the order. ``hold``, when set, keeps charges waiting
until it is set: the tests and the demo use it to keep a request inside its
lock while they act.
"""

from __future__ import annotations

import asyncio

#: (order, fencing token) of every charge, in order.
charges: list[tuple[int, int]] = []
#: Charges wait for this event while it is not None (tests and the demo set it).
hold: asyncio.Event | None = None
#: Set while a charge is waiting on ``hold`` (the request is inside its lock).
waiting: asyncio.Event | None = None


async def charge(order_id: int, *, fencing_token: int) -> None:
    if hold is not None:
        if waiting is not None:
            waiting.set()
        await hold.wait()
    charges.append((order_id, fencing_token))
