"""One hierarchy for every error zk-recipes raises.

Keep "you asked for something wrong" apart from "the world broke it": the
first is a bug in the caller and retrying will not help; the second is what
coordination code must plan for. kazoo errors are wrapped (``raise ... from
exc``) so callers never need to import kazoo to handle ours.

::

    ZkRecipesError
    ├── ConfigurationError        bad settings, hosts string, option values
    ├── InvalidPathError          malformed znode path (ValueError too)
    ├── DataTooLargeError         node data over the server's 1 MB limit (ValueError too)
    ├── ClientStateError          client not started, closed, or used after fork()
    ├── RecipeUsageError          misuse: re-entering a non-re-entrant lock, releasing
    │                             a lock this thread does not hold (RuntimeError too)
    ├── UnsupportedFeatureError   the server is too old for what was asked
    ├── ZkTimeoutError            an operation did not finish in time (TimeoutError too)
    │   ├── ConnectTimeoutError   start() could not reach the ensemble in time
    │   └── LockTimeout           a lock/lease was not acquired in time (context forms)
    ├── ConnectionLostError       the connection broke (retryable)
    │   ├── OperationTimeoutError the server did not answer in time (retryable; TimeoutError too)
    │   ├── SessionMovedError     the session moved to another server (retryable)
    │   └── SessionLost           the session expired, really or simulated (NOT retryable)
    │       └── LockLost          a lock this process held is gone with its session
    ├── RetriesExhaustedError     a retry policy gave up; __cause__ holds the last error
    └── NodeError                 a ZooKeeper answer about one node (carries .path)
        ├── NoNodeError
        ├── NodeExistsError
        ├── BadVersionError
        ├── NotEmptyError
        ├── NoAuthError
        ├── NoChildrenForEphemeralsError
        └── CorruptedValueError   a counter node's bytes are not a number (ValueError too)
"""

from __future__ import annotations


class ZkRecipesError(Exception):
    """Root of every error raised by zk-recipes."""


class ConfigurationError(ZkRecipesError):
    """A setting or option has a wrong value; the message says which and how to fix it."""


class InvalidPathError(ZkRecipesError, ValueError):
    """A znode path is malformed (relative, trailing slash, empty segment, reserved name)."""


class DataTooLargeError(ZkRecipesError, ValueError):
    """Node data exceeds what the server accepts (jute.maxbuffer, 1 MB by default)."""


class ClientStateError(ZkRecipesError):
    """The client cannot serve the call in its current state (not started, closed, forked)."""


class RecipeUsageError(ZkRecipesError, RuntimeError):
    """A recipe was used the wrong way (the message says how to use it)."""


class UnsupportedFeatureError(ZkRecipesError):
    """The connected ZooKeeper server does not support the requested feature."""


class ZkTimeoutError(ZkRecipesError, TimeoutError):
    """An operation did not complete within its timeout."""


class ConnectTimeoutError(ZkTimeoutError):
    """The client could not establish a session with the ensemble within the timeout."""


class LockTimeout(ZkTimeoutError):
    """A lock, lease or leadership was not acquired within the timeout."""


class ConnectionLostError(ZkRecipesError):
    """The connection to the server broke; the operation may or may not have been applied."""


class OperationTimeoutError(ConnectionLostError, TimeoutError):
    """The server did not answer a request in time; it may still apply it."""


class SessionMovedError(ConnectionLostError):
    """The session was re-established on another server while this request was in flight."""


class SessionLost(ConnectionLostError):
    """The session is gone: every ephemeral node it owned is (or soon will be) deleted."""


class LockLost(SessionLost):
    """A lock held by this process was lost with its session: another process may hold it now."""


class RetriesExhaustedError(ZkRecipesError):
    """A retry policy refused another attempt; ``__cause__`` is the last failure."""


class NodeError(ZkRecipesError):
    """The server rejected an operation on one node."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NoNodeError(NodeError):
    """The node (or its parent, for create) does not exist."""


class NodeExistsError(NodeError):
    """The node already exists."""


class BadVersionError(NodeError):
    """A versioned write lost a race: the node changed since it was read."""


class NotEmptyError(NodeError):
    """The node has children and cannot be deleted."""


class NoAuthError(NodeError):
    """The node's ACL does not allow this client to do that."""


class NoChildrenForEphemeralsError(NodeError):
    """Ephemeral nodes cannot have children."""


class CorruptedValueError(NodeError, ValueError):
    """A counter node holds fewer bytes than its number needs (Curator: "Corrupted data")."""


__all__ = [
    "BadVersionError",
    "ClientStateError",
    "ConfigurationError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "CorruptedValueError",
    "DataTooLargeError",
    "InvalidPathError",
    "LockLost",
    "LockTimeout",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OperationTimeoutError",
    "RecipeUsageError",
    "RetriesExhaustedError",
    "SessionLost",
    "SessionMovedError",
    "UnsupportedFeatureError",
    "ZkRecipesError",
    "ZkTimeoutError",
]
