"""kazoo's failures as ours: the one table of messages, and the socket errors kazoo expects.

``translate`` turns a kazoo (or handler) exception into the zk_recipes error
for it; the messages live here, not in the errors' docstrings: users match on
them, docstrings get edited. The socket helpers make the exceptions kazoo's
connection loop expects from a read or a write (socket_io reports its
failures through them, and never imports kazoo).
"""

from __future__ import annotations

import kazoo.exceptions as kz_exc
from kazoo.exceptions import ConnectionDropped
from kazoo.handlers.threading import KazooTimeoutError

from zk_recipes import _errors as errors

#: kazoo's answer about one node -> (our error, message). The messages live here,
#: not in the errors' docstrings: users match on them, docstrings get edited.
NODE_ERRORS: tuple[tuple[type[BaseException], type[errors.NodeError], str], ...] = (
    (kz_exc.NoNodeError, errors.NoNodeError, "{path} does not exist (for a create: its parent)"),
    (kz_exc.NodeExistsError, errors.NodeExistsError, "{path} already exists"),
    (
        kz_exc.BadVersionError,
        errors.BadVersionError,
        "{path} changed since it was read (its version is not the one given)",
    ),
    (kz_exc.NotEmptyError, errors.NotEmptyError, "{path} has children and cannot be deleted"),
    (
        kz_exc.NoAuthError,
        errors.NoAuthError,
        "not allowed on {path}: check the client's auth= / sasl= credentials against the "
        "node's ACL (or the default_acl the node was created with)",
    ),
    (kz_exc.NoWatcherError, errors.NoWatcherError, "no watch of this connection on {path}"),
    (
        kz_exc.NoChildrenForEphemeralsError,
        errors.NoChildrenForEphemeralsError,
        "cannot create {path}: a parent of it is an EPHEMERAL node; recipe directories "
        "need persistent (or container) parents, so pick a path outside ephemeral nodes",
    ),
)


def translate(
    exc: BaseException, path: str | None = None, *, stopped: bool = True
) -> errors.ZkRecipesError:
    """The zk_recipes error for a kazoo (or handler) exception.

    ``stopped``: whether we stopped this kazoo client ourselves; a kazoo client
    closed behind our back (its connection thread died) is a lost connection
    that the client is re-establishing, not a closed client.
    """
    where = path or "request"
    for kz_type, ours, message in NODE_ERRORS:
        if isinstance(exc, kz_type):
            return ours(message.format(path=path), path)
    if isinstance(exc, kz_exc.SessionExpiredError):
        return errors.SessionLost(f"the ZooKeeper session expired ({where})")
    if isinstance(exc, (kz_exc.OperationTimeoutError, KazooTimeoutError)):
        return errors.OperationTimeoutError(f"ZooKeeper did not answer in time ({where})")
    if isinstance(exc, kz_exc.SessionMovedError):
        return errors.SessionMovedError(f"the session moved to another server ({where})")
    if isinstance(exc, (kz_exc.ConnectionLoss, kz_exc.ConnectionDropped)):
        return errors.ConnectionLostError(f"connection to ZooKeeper lost ({where})")
    if isinstance(exc, kz_exc.ConnectionClosedError):
        if not stopped:
            return errors.ConnectionLostError(
                f"the connection to ZooKeeper ended and is being re-established ({where})"
            )
        return errors.ClientStateError("the client is closed; start() it or make a new one")
    if isinstance(exc, kz_exc.AuthFailedError):
        return errors.ConfigurationError(
            "ZooKeeper rejected the client's credentials (AUTH_FAILED); check auth/sasl settings"
        )
    if isinstance(exc, kz_exc.UnimplementedError):
        return errors.UnsupportedFeatureError(
            f"the server does not implement this request ({path})"
        )
    if isinstance(exc, kz_exc.MarshallingError):
        return errors.UnsupportedFeatureError(
            f"the server could not handle this request ({where}): MarshallingError. A "
            "persistent watch needs ZooKeeper 3.6 or later with its default watch manager "
            "(not WatchManagerOptimized); removing one by its own type needs 3.9"
        )
    if isinstance(exc, kz_exc.InvalidACLError):
        return errors.ConfigurationError(f"invalid ACL for {path}")
    return errors.ZkRecipesError(f"ZooKeeper error on {where}: {exc!r}")


def read_timed_out() -> BaseException:
    error: BaseException = KazooTimeoutError("socket time-out during read")
    return error


def write_timed_out() -> BaseException:
    error: BaseException = KazooTimeoutError("socket time-out during write")
    return error


def broken() -> BaseException:
    error: BaseException = ConnectionDropped("socket connection broken")
    return error


def dropped(exc: OSError) -> BaseException:
    """A socket error as kazoo's ``_socket_error_handling`` reports it."""
    error: BaseException = ConnectionDropped(f"socket connection error: {exc.strerror or exc}")
    return error


def not_connected(hosts: str, timeout: float, problem: str | None) -> str:
    """Why a start gave up: no session within ``timeout``, the last problem, and a hint."""
    return (
        f"could not connect to ZooKeeper at {hosts} within {timeout:g} s"
        + (f" (last problem: {problem})" if problem else "")
        + ". Check that the servers are running and reachable from here (e.g. `echo "
        "ruok | nc HOST PORT` answers imok), that the hosts setting is right, and "
        "that TLS/auth settings match the servers."
    )
