"""Structured fields of our log records: what JSON log formatters pick up.

Every record a recipe or the client logs about a state change, a loss, a
simulated expiry, a refused acquire or a guaranteed delete carries
``extra=fields(event, ...)``: ``zk_event`` names what happened (``lock.lost``,
``client.state``...), and each other value becomes a ``zk_``-prefixed
attribute of the record (a prefix no LogRecord attribute has, so none is
ever shadowed). Session ids are hex strings, as ZooKeeper's own logs and
zkCli print them. The list is in docs/operations.md.
"""

from __future__ import annotations

import logging

# A library adds a NullHandler to its top logger (the logging HOWTO): in an app
# that set up no logging, our WARNING lines (a SUSPENDED connection, say) would
# otherwise be printed on stderr by Python's last-resort handler. Configure
# ``zk_recipes`` (or the root logger) to see them.
logging.getLogger("zk_recipes").addHandler(logging.NullHandler())


def fields(event: str, **values: object) -> dict[str, object]:
    """``extra=`` for a record about ``event``; values that are None are left out."""
    extra: dict[str, object] = {"zk_event": event}
    for name, value in values.items():
        if value is None:
            continue
        if name == "session_id" and isinstance(value, int):
            value = f"{value:#x}"
        extra["zk_" + name] = value
    return extra
