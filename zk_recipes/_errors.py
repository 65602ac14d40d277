"""One hierarchy for every error zk-recipes raises.

Keep "you asked for something wrong" apart from "the world broke it": the
first is a bug in the caller and retrying will not help; the second is what
coordination code must plan for. Among the second, keep "try again" apart
from "it is gone": ``ConnectionLostError`` is transient (retry once
connected), ``SessionLost`` is terminal (the session's ephemeral nodes, and
every lock, lease and leadership they carried, are gone). They are siblings
on purpose: code that retries on ``ConnectionLostError`` must never retry
its way past a lost lock. kazoo errors are wrapped (``raise ... from exc``)
so callers never need to import kazoo to handle ours.

::

    ZkRecipesError
    ├── ConfigurationError        a bad setting or argument (ValueError too); says what to fix
    │   ├── WrongTypeError        ... of the wrong type (TypeError too)
    │   ├── InvalidPathError      a malformed znode path
    │   └── DataTooLargeError     node data or a whole request over the server's limit
    │                             (jute.maxbuffer, 1 MB by default): refused, not sent
    ├── ClientStateError          client not started, closed, or used after fork()
    ├── RecipeUsageError          misuse: re-entering a non-re-entrant lock, releasing
    │                             a lock this thread does not hold (RuntimeError too)
    ├── UnsupportedFeatureError   the server is too old for what was asked
    ├── ZkTimeoutError            an operation did not finish in time (TimeoutError too)
    │   ├── ConnectTimeoutError   start() could not reach the ensemble in time
    │   └── LockTimeout           a lock/lease was not acquired in time (context forms)
    ├── ConnectionLostError       the connection broke: TRANSIENT, retry once connected
    │   ├── OperationTimeoutError the server did not answer in time (TimeoutError too)
    │   ├── SessionMovedError     the session moved to another server
    │   ├── OutcomeUnknown        a write's reply was lost and nothing tells whether it
    │   │   │                     applied: never resent by a retry policy
    │   │   └── TransactionOutcomeUnknown   ... a transaction's
    │   └── UnavailableError      not connected now: a face answers 503 / exits 69 at once
    ├── SessionLost               the session is gone, really or simulated: TERMINAL
    │   ├── LockLost              a lock this process held is gone with its session
    │   └── HolderSessionLost     a write as the holder of a node, refused unsent: the
    │                             session that made the node is no longer the client's
    ├── RetriesExhaustedError     a retry policy gave up; __cause__ holds the last error
    └── NodeError                 a ZooKeeper answer about one node (carries .path)
        ├── NoNodeError
        ├── NodeExistsError
        ├── BadVersionError
        ├── NotEmptyError
        ├── NoAuthError
        ├── NoChildrenForEphemeralsError
        ├── CorruptedValueError   a counter node's bytes are not a number (ValueError too)
        └── SequenceOverflowError a contender directory's sequence numbers wrapped around
"""

from __future__ import annotations


class ZkRecipesError(Exception):
    """Root of every error raised by zk-recipes."""


class ConfigurationError(ZkRecipesError, ValueError):
    """A setting or argument has a wrong value; the message says which and how to fix it."""


class WrongTypeError(ConfigurationError, TypeError):
    """A setting or argument has the wrong type (a ConfigurationError that is a TypeError too)."""


class InvalidPathError(ConfigurationError):
    """A znode path is malformed (relative, trailing slash, empty segment, reserved name)."""


class DataTooLargeError(ConfigurationError):
    """Node data, or a whole request (a path, ACLs, a multi), exceeds what the server accepts.

    The server's jute.maxbuffer (1 MB by default) bounds each request packet; it
    drops the connection of a larger one, so the client refuses it unsent.
    """


class ClientStateError(ZkRecipesError):
    """The client cannot serve the call in its current state (not started, closed, forked)."""


class RecipeUsageError(ZkRecipesError, RuntimeError):
    """A recipe was used the wrong way (the message says how to use it)."""


class EventsBehindError(ZkRecipesError):
    """A consumer of an event stream fell so far behind that events were dropped.

    The stream ends with it; read the snapshot again (``cache.current()``) and
    start a new stream.
    """


class CacheOverflowError(ZkRecipesError):
    """A cache reached its ``max_nodes``: it stopped rather than grow without bound."""


class UnsupportedFeatureError(ZkRecipesError):
    """The connected ZooKeeper server does not support the requested feature."""


class ZkTimeoutError(ZkRecipesError, TimeoutError):
    """An operation did not complete within its timeout."""


class ConnectTimeoutError(ZkTimeoutError):
    """The client could not establish a session with the ensemble within the timeout."""


class LockTimeout(ZkTimeoutError):
    """A lock, lease or leadership was not acquired within the timeout."""


class ConnectionLostError(ZkRecipesError):
    """The connection broke; the operation may or may not have been applied. Retryable."""


class OperationTimeoutError(ConnectionLostError, TimeoutError):
    """The server did not answer a request in time; it may still apply it."""


class SessionMovedError(ConnectionLostError):
    """The session was re-established on another server while this request was in flight."""


class UnavailableError(ConnectionLostError):
    """ZooKeeper cannot be reached from this process now; nothing was sent, or nothing answered.

    What the framework faces raise instead of waiting when their client is not
    connected (connecting for the first time after a failed attempt,
    SUSPENDED, LOST and reconnecting) or a request of a lock attempt went
    unanswered: a web request is answered 503 and a command exits 69 at once,
    never "busy" (nobody was seen holding anything). ``problem`` is the
    connection's newest failure in words, when one is known.
    """

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem

    def __reduce__(self) -> tuple[type[UnavailableError], tuple[str, str | None]]:
        return type(self), (str(self), self.problem)


class SessionLost(ZkRecipesError):
    """The session is gone: its ephemeral nodes (locks, leases, leadership) are gone too.

    Not retryable as such: whatever the session held must be taken again.
    """


class LockLost(SessionLost):
    """A lock held by this process was lost with its session: another process may hold it now."""


class HolderSessionLost(SessionLost):
    """A write made as the holder of a node was refused before anything was sent.

    The session that made the node (a queue claim, a lease, a registered
    instance) is no longer this client's live session, so the node at that
    path may be someone else's now, whatever its version says: nothing of the
    write was sent, and nothing of it applied.
    """


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


class NoWatcherError(NodeError):
    """No watch of this connection matched on the path (``removeWatches``, ``checkWatches``)."""


class CorruptedValueError(NodeError, ValueError):
    """A counter node holds fewer bytes than its number needs (Curator: "Corrupted data")."""


class TransactionFailedError(ZkRecipesError):
    """A transaction was refused as a whole: nothing of it was applied.

    ``index`` and ``operation`` name the operation that failed, ``cause`` is
    its error (a NodeExistsError, a BadVersionError, ...).
    """

    def __init__(self, message: str, index: int, operation: str, cause: ZkRecipesError) -> None:
        super().__init__(message)
        self.index = index
        self.operation = operation
        self.cause = cause


class OutcomeUnknown(ConnectionLostError):
    """A write's reply was lost, and nothing can tell whether it was applied.

    Never sent again by a retry policy (``is_retryable`` says no): a second
    copy of a sequential node, or of a transaction, would be a silent
    duplicate. Check what the write was to change before sending it again.
    A sequential create that is not protected raises it (``protected=True``
    finds its node after a lost reply instead).
    """


class TransactionOutcomeUnknown(OutcomeUnknown):
    """The connection went while a transaction was sent: it may or may not have been applied.

    Raised only for a transaction without a protected create, whose node
    would have told; check what it was to change before sending it again.
    """


class UnreadableInstanceError(ZkRecipesError, ValueError):
    """A service instance node that does not parse as curator-x-discovery's JSON.

    Queries and caches skip such a node (logged, counted) rather than fail.
    """


class SequenceOverflowError(NodeError):
    """A contender directory's 32-bit sequence counter wrapped: its queue order is broken.

    The message says how to recover (recreate the directory).
    """


def shown(value: object, *bounds: float) -> str:
    """A value as an error message shows it: ``repr``, floats rounded to 12 digits.

    Settings are often computed (``0.1 * 3``, ``float(os.environ[...]) * 1.5``)
    and a message that says "got 0.30000000000000004" makes the reader look
    for the wrong mistake. Twelve significant digits keep every digit a person
    writes and drop the binary noise of the last few. ``bounds`` are what the
    message compares the value with: a value that would round onto one of
    them (1.0000000000000002 against "at most 1") is shown in full.
    """
    if not isinstance(value, float) or value != value or value.is_integer():
        return repr(value)  # 2.0 stays 2.0: "an int, got 2" would hide the mistake
    text = f"{value:.12g}"
    if float(text) != value and any(text == f"{float(bound):.12g}" for bound in bounds):
        return repr(value)
    return text


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
    "SequenceOverflowError",
    "SessionLost",
    "SessionMovedError",
    "UnavailableError",
    "UnsupportedFeatureError",
    "WrongTypeError",
    "ZkRecipesError",
    "ZkTimeoutError",
]
