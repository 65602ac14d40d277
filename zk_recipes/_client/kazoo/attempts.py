"""kazoo's logger, wrapped: it remembers why the last connection attempt failed.

kazoo logs why each attempt failed (refused, TLS handshake, time-out, a name
that does not resolve) and tells its callers only "timed out"; the newest of
those lines is kept as the connection's problem, for ConnectTimeoutError,
UnavailableError, the SUSPENDED/LOST log lines and health checks.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

#: The starts of kazoo's per-attempt lines from its connection loop: logged at
#: DEBUG, not WARNING. An unreachable ensemble made ~35 of them before a
#: command's own one-line answer; the client says each state change once, at
#: WARNING when it went bad, with the newest of these as its reason
#: (``SessionTracker._log_state``, ``ConnectTimeoutError``, ``UnavailableError``).
PER_ATTEMPT = (
    "Connection dropped",
    "Connection time-out",
    "Transition to CONNECTING",
    "Cannot resolve",
    "Session has expired",
    "AUTH_FAILED closing",
    "Found a RW server",
    "Failed connecting to Zookeeper",
)


class RecordingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger: remembers the last problem of its connection, says it at DEBUG."""

    message = ""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level < logging.WARNING:
            # kazoo logs every packet at BLATHER and DEBUG: one check, nothing formatted.
            if self.logger.isEnabledFor(level):
                super().log(level, msg, *args, **kwargs)
            return
        text = ""
        with contextlib.suppress(Exception):
            text = str(msg) % args if args else str(msg)
            if not text.startswith(("Failed connecting to Zookeeper", "Transition to")):
                self.message = text[:300]  # not kazoo's own farewell on stop()
        if level < logging.ERROR and text.startswith(PER_ATTEMPT):
            level = logging.DEBUG
            if not self.logger.isEnabledFor(level):
                return
        super().log(level, msg, *args, **kwargs)
