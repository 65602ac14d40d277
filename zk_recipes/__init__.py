"""zk-recipes: ZooKeeper coordination recipes for Python, wire-compatible with Curator.

Everything public is imported from here; modules starting with ``_`` are
private. ``zk_recipes.testing`` (real-server harness, pytest plugin) is a
separate, opt-in subpackage.

Layering (each layer imports only those below it; tests/test_boundaries.py
keeps it so):

- leaves: ``_errors`` (the error tree), ``_types`` (value types, no kazoo),
  ``_paths``, ``_deadline``, ``_retry``, ``_settings``;
- ``_client/``: the session layer (Curator's curator-framework): the kazoo
  adapter (the only module that imports kazoo), the session tracker and its
  loss epoch, states and listeners, ``ZkClient`` and its create/delete
  collaborators, ``ProcessClient``;
- ``_internals/``: machinery shared by the recipe families (Curator's
  LockInternals and friends): the contender queue, the held-node validity
  model, the lock-like contract, the reconciler, lifecycles, threads;
- the families, named after Curator's packages: ``_locks``, ``_leader``
  (may use ``_locks``), ``_barriers``, ``_counters`` (may use ``_locks``),
  ``_nodes``;
- this facade.

Public classes report ``zk_recipes.<Name>`` in reprs and tracebacks (their
``__module__`` is rewritten below, as trio does), so the private layout can
change without users noticing.
"""

from __future__ import annotations

from zk_recipes._barriers.barrier import (
    Barrier as Barrier,
)
from zk_recipes._barriers.double_barrier import (
    DoubleBarrier as DoubleBarrier,
)
from zk_recipes._client.client import (
    ZkClient as ZkClient,
)
from zk_recipes._client.creates import (
    CreateResult as CreateResult,
)
from zk_recipes._client.kazoo import (
    Pending as Pending,
)
from zk_recipes._client.process import (
    ProcessClient as ProcessClient,
)
from zk_recipes._client.states import (
    ConnectionState as ConnectionState,
)
from zk_recipes._client.states import (
    StateChange as StateChange,
)
from zk_recipes._counters.atomic import (
    AtomicInt as AtomicInt,
)
from zk_recipes._counters.atomic import (
    AtomicLong as AtomicLong,
)
from zk_recipes._counters.atomic import (
    AtomicStats as AtomicStats,
)
from zk_recipes._counters.atomic import (
    AtomicValue as AtomicValue,
)
from zk_recipes._counters.atomic import (
    PromotedToLock as PromotedToLock,
)
from zk_recipes._counters.shared_count import (
    SharedCount as SharedCount,
)
from zk_recipes._counters.shared_count import (
    VersionedValue as VersionedValue,
)
from zk_recipes._errors import (
    BadVersionError as BadVersionError,
)
from zk_recipes._errors import (
    ClientStateError as ClientStateError,
)
from zk_recipes._errors import (
    ConfigurationError as ConfigurationError,
)
from zk_recipes._errors import (
    ConnectionLostError as ConnectionLostError,
)
from zk_recipes._errors import (
    ConnectTimeoutError as ConnectTimeoutError,
)
from zk_recipes._errors import (
    CorruptedValueError as CorruptedValueError,
)
from zk_recipes._errors import (
    DataTooLargeError as DataTooLargeError,
)
from zk_recipes._errors import (
    InvalidPathError as InvalidPathError,
)
from zk_recipes._errors import (
    LockLost as LockLost,
)
from zk_recipes._errors import (
    LockTimeout as LockTimeout,
)
from zk_recipes._errors import (
    NoAuthError as NoAuthError,
)
from zk_recipes._errors import (
    NoChildrenForEphemeralsError as NoChildrenForEphemeralsError,
)
from zk_recipes._errors import (
    NodeError as NodeError,
)
from zk_recipes._errors import (
    NodeExistsError as NodeExistsError,
)
from zk_recipes._errors import (
    NoNodeError as NoNodeError,
)
from zk_recipes._errors import (
    NotEmptyError as NotEmptyError,
)
from zk_recipes._errors import (
    OperationTimeoutError as OperationTimeoutError,
)
from zk_recipes._errors import (
    RecipeUsageError as RecipeUsageError,
)
from zk_recipes._errors import (
    RetriesExhaustedError as RetriesExhaustedError,
)
from zk_recipes._errors import (
    SequenceOverflowError as SequenceOverflowError,
)
from zk_recipes._errors import (
    SessionLost as SessionLost,
)
from zk_recipes._errors import (
    SessionMovedError as SessionMovedError,
)
from zk_recipes._errors import (
    UnsupportedFeatureError as UnsupportedFeatureError,
)
from zk_recipes._errors import (
    WrongTypeError as WrongTypeError,
)
from zk_recipes._errors import (
    ZkRecipesError as ZkRecipesError,
)
from zk_recipes._errors import (
    ZkTimeoutError as ZkTimeoutError,
)
from zk_recipes._internals.locklike import (
    LockLike as LockLike,
)
from zk_recipes._leader.latch import (
    CloseMode as CloseMode,
)
from zk_recipes._leader.latch import (
    LeaderLatch as LeaderLatch,
)
from zk_recipes._leader.latch import (
    LeaderLatchListener as LeaderLatchListener,
)
from zk_recipes._leader.latch import (
    LeaderLatchStatistics as LeaderLatchStatistics,
)
from zk_recipes._leader.participants import (
    ErrorPolicy as ErrorPolicy,
)
from zk_recipes._leader.participants import (
    Participant as Participant,
)
from zk_recipes._leader.selector import (
    LeaderSelector as LeaderSelector,
)
from zk_recipes._leader.selector import (
    LeaderSelectorStatistics as LeaderSelectorStatistics,
)
from zk_recipes._leader.selector import (
    LeadershipContext as LeadershipContext,
)
from zk_recipes._locks.lock import (
    Contender as Contender,
)
from zk_recipes._locks.lock import (
    Lock as Lock,
)
from zk_recipes._locks.lock import (
    LockStatistics as LockStatistics,
)
from zk_recipes._locks.lock import (
    RLock as RLock,
)
from zk_recipes._locks.multilock import (
    MultiLock as MultiLock,
)
from zk_recipes._locks.multilock import (
    MultiLockStatistics as MultiLockStatistics,
)
from zk_recipes._locks.rwlock import (
    ReadLock as ReadLock,
)
from zk_recipes._locks.rwlock import (
    ReadWriteLock as ReadWriteLock,
)
from zk_recipes._locks.rwlock import (
    WriteLock as WriteLock,
)
from zk_recipes._locks.semaphore import (
    Lease as Lease,
)
from zk_recipes._locks.semaphore import (
    Semaphore as Semaphore,
)
from zk_recipes._locks.semaphore import (
    SemaphoreMutex as SemaphoreMutex,
)
from zk_recipes._locks.semaphore import (
    SemaphoreStatistics as SemaphoreStatistics,
)
from zk_recipes._nodes.group_member import (
    GroupMember as GroupMember,
)
from zk_recipes._nodes.group_member import (
    MembershipChange as MembershipChange,
)
from zk_recipes._nodes.persistent_node import (
    PersistentNode as PersistentNode,
)
from zk_recipes._nodes.persistent_node import (
    PersistentNodeEvent as PersistentNodeEvent,
)
from zk_recipes._nodes.persistent_node import (
    PersistentNodeState as PersistentNodeState,
)
from zk_recipes._retry import (
    BoundedExponentialBackoffRetry as BoundedExponentialBackoffRetry,
)
from zk_recipes._retry import (
    ExponentialBackoffRetry as ExponentialBackoffRetry,
)
from zk_recipes._retry import (
    PlateauRetry as PlateauRetry,
)
from zk_recipes._retry import (
    RetryForever as RetryForever,
)
from zk_recipes._retry import (
    RetryNTimes as RetryNTimes,
)
from zk_recipes._retry import (
    RetryOneTime as RetryOneTime,
)
from zk_recipes._retry import (
    RetryPolicy as RetryPolicy,
)
from zk_recipes._retry import (
    RetryUntilElapsed as RetryUntilElapsed,
)
from zk_recipes._retry import (
    is_retryable as is_retryable,
)
from zk_recipes._retry import (
    retry as retry,
)
from zk_recipes._settings import (
    ClientSettings as ClientSettings,
)
from zk_recipes._settings import (
    TlsOptions as TlsOptions,
)
from zk_recipes._types import (
    CREATOR_ALL_ACL as CREATOR_ALL_ACL,
)
from zk_recipes._types import (
    OPEN_ACL_UNSAFE as OPEN_ACL_UNSAFE,
)
from zk_recipes._types import (
    READ_ACL_UNSAFE as READ_ACL_UNSAFE,
)
from zk_recipes._types import (
    Acl as Acl,
)
from zk_recipes._types import (
    CreateMode as CreateMode,
)
from zk_recipes._types import (
    Owner as Owner,
)
from zk_recipes._types import (
    Perms as Perms,
)
from zk_recipes._types import (
    WatchEvent as WatchEvent,
)
from zk_recipes._types import (
    WatchEventType as WatchEventType,
)
from zk_recipes._types import (
    ZnodeStat as ZnodeStat,
)
from zk_recipes._types import (
    digest_acl as digest_acl,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "Acl",
    "AtomicInt",
    "AtomicLong",
    "AtomicStats",
    "AtomicValue",
    "BadVersionError",
    "Barrier",
    "BoundedExponentialBackoffRetry",
    "ClientSettings",
    "ClientStateError",
    "CloseMode",
    "ConfigurationError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "ConnectionState",
    "Contender",
    "CorruptedValueError",
    "CreateMode",
    "CreateResult",
    "DataTooLargeError",
    "DoubleBarrier",
    "ErrorPolicy",
    "ExponentialBackoffRetry",
    "GroupMember",
    "InvalidPathError",
    "LeaderLatch",
    "LeaderLatchListener",
    "LeaderLatchStatistics",
    "LeaderSelector",
    "LeaderSelectorStatistics",
    "LeadershipContext",
    "Lease",
    "Lock",
    "LockLike",
    "LockLost",
    "LockStatistics",
    "LockTimeout",
    "MembershipChange",
    "MultiLock",
    "MultiLockStatistics",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OperationTimeoutError",
    "Owner",
    "Participant",
    "Pending",
    "Perms",
    "PersistentNode",
    "PersistentNodeEvent",
    "PersistentNodeState",
    "PlateauRetry",
    "ProcessClient",
    "PromotedToLock",
    "RLock",
    "ReadLock",
    "ReadWriteLock",
    "RecipeUsageError",
    "RetriesExhaustedError",
    "RetryForever",
    "RetryNTimes",
    "RetryOneTime",
    "RetryPolicy",
    "RetryUntilElapsed",
    "Semaphore",
    "SemaphoreMutex",
    "SemaphoreStatistics",
    "SequenceOverflowError",
    "SessionLost",
    "SessionMovedError",
    "SharedCount",
    "StateChange",
    "TlsOptions",
    "UnsupportedFeatureError",
    "VersionedValue",
    "WatchEvent",
    "WatchEventType",
    "WriteLock",
    "WrongTypeError",
    "ZkClient",
    "ZkRecipesError",
    "ZkTimeoutError",
    "ZnodeStat",
    "__version__",
    "digest_acl",
    "is_retryable",
    "retry",
]


def _fixup_module_metadata(module_name: str, namespace: dict[str, object]) -> None:
    """Make every public object say it lives in ``zk_recipes`` (trio's fixup_module_metadata)."""
    seen: set[int] = set()

    def fix(name: str, qualname: str, obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str) or not module.startswith("zk_recipes._"):
            return
        try:
            obj.__module__ = module_name
        except (AttributeError, TypeError):
            return
        if isinstance(obj, type):
            obj.__qualname__ = qualname
            for attr_name, attr_value in vars(obj).items():
                if not attr_name.startswith("_") and (
                    isinstance(attr_value, type) or callable(attr_value)
                ):
                    fix(attr_name, f"{qualname}.{attr_name}", attr_value)

    for name in __all__:
        if not name.startswith("__"):
            fix(name, name, namespace[name])


_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
