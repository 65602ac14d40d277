"""How the demo keeps a lock held for as long as it needs: until it says so.

``django_demo.py`` shows other clicks and other hosts being refused while a
send holds its lock. Work that lasts a fixed time may be over, on a busy
machine, before they even try; so for the processes it wants holding, the
demo sets ``DEMO_HOLD_UNTIL`` to a file, and the work under the lock waits for
that file (a minute at most), which the demo creates once it has seen the
others refused. Unset, as in real use, :func:`hold_until_told` returns at once.
"""

from __future__ import annotations

import os
import time

#: The longest the work waits for the demo's file: a failed demo leaves nothing running for long.
HOLD_TIMEOUT = 60.0


def hold_until_told() -> None:
    """Wait until the file ``$DEMO_HOLD_UNTIL`` names exists (if it is set; at most a minute)."""
    path = os.environ.get("DEMO_HOLD_UNTIL")
    if not path:
        return
    deadline = time.monotonic() + HOLD_TIMEOUT
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
