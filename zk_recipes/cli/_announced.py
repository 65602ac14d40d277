"""Run a command while an instance of a service is registered: ``zk-recipes announce``.

The instance is registered once the command's process exists and just
before it starts, and unregistered the moment it ends (its node deleted,
nobody waits for the session to expire). The command runs as ``lock`` runs
it (``_child``): in a process group of its own, signals passed on, stopped
with this process even on kill -9 (a keeper takes the group down), so an
instance never outlives its command. A loss of the session does not stop
the command: the registration is put back with the next session, as
``ServiceDiscovery`` does for every instance (the service stays up; only
its node was gone for that while).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from zk_recipes import (
    ConfigurationError,
    NodeExistsError,
    ServiceDiscovery,
    ServiceInstance,
    ZkClient,
)
from zk_recipes.cli._child import Child, SignalRelay
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._guarded import check_command, checked_grace
from zk_recipes.cli._supervise import command_text, run_command, say

log = logging.getLogger("zk_recipes.cli")


def run_announced(
    client: ZkClient,
    instance: ServiceInstance,
    command: Sequence[str],
    *,
    base_path: str = "/services",
    grace: float | None = None,
    out: TextIO | None = None,
) -> int:
    """Run ``command`` with ``instance`` registered under ``base_path``; its exit status."""
    job = check_command(command)
    if callable(job):
        raise ConfigurationError("announce runs a program: give its argv")
    out = sys.stderr if out is None else out
    what = f"the instance {instance.id} of {instance.name}"
    stop_after = checked_grace(client, grace)
    wake = threading.Event()
    discovery = ServiceDiscovery(client, base_path)
    with SignalRelay(wake) as relay:
        child = Child(job, terminal=relay.terminal, on_suspend=lambda: None)
        failed = child.spawn(wake)
        if failed is not None:
            code, reason = failed
            say(out, reason)
            return code
        try:
            discovery.register(instance)
        except NodeExistsError as exc:
            child.close(stop_after)
            say(out, f"not running {command_text(job)}: {exc}")
            return ExitCode.CONFIG
        except BaseException:
            child.close(stop_after)
            raise
        log.info("announced %s: running %s", what, command_text(job, whole=True))
        try:
            return run_command(out, what, child, relay, wake, lambda: True, stop_after)
        finally:
            discovery.close()  # the node goes now, not at the session's end
