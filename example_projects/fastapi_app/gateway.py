"""A stand-in payment gateway for the quick start: it records each charge with its token.

A real gateway would refuse a charge whose fencing token is older than the
last one it saw for the order. ``hold``, when set, keeps charges waiting
until it is set: the in-process tests use it to keep a request inside its
lock while they act. ``DEMO_HOLD_UNTIL`` does the same across processes for
the demo (fastapi_demo.py): a charge waits until that file exists (a minute
at most). Unset, as in real use, a charge returns at once.
"""

from __future__ import annotations

import asyncio
import os
import time

#: (order, fencing token) of every charge, in order.
charges: list[tuple[int, int]] = []
#: Charges wait for this event while it is not None (tests and the demo set it).
hold: asyncio.Event | None = None
#: Set while a charge is waiting on ``hold`` (the request is inside its lock).
waiting: asyncio.Event | None = None


#: The longest a charge waits for the demo's file: a failed demo leaves nothing hanging long.
HOLD_TIMEOUT = 60.0


async def charge(order_id: int, *, fencing_token: int) -> None:
    told = os.environ.get("DEMO_HOLD_UNTIL")
    if told:
        deadline = time.monotonic() + HOLD_TIMEOUT
        while not os.path.exists(told) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    if hold is not None:
        if waiting is not None:
            waiting.set()
        await hold.wait()
    charges.append((order_id, fencing_token))
