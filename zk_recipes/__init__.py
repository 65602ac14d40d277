"""zk-recipes: ZooKeeper coordination recipes for Python, wire-compatible with Curator.

Everything public is imported from here; modules starting with ``_`` are
private. ``zk_recipes.testing`` (real-server harness, pytest plugin) is a
separate, opt-in subpackage.
"""

from __future__ import annotations

from zk_recipes._acl import (
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Acl,
    Perms,
    digest_acl,
)
from zk_recipes._barriers.barrier import Barrier, DoubleBarrier
from zk_recipes._client.client import CreateResult, ZkClient
from zk_recipes._client.kazoo import CreateMode, Pending, WatchEvent, WatchEventType, ZnodeStat
from zk_recipes._client.process import ProcessClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._counters.atomic import (
    AtomicInt,
    AtomicLong,
    AtomicStats,
    AtomicValue,
    PromotedToLock,
)
from zk_recipes._counters.shared_count import SharedCount, VersionedValue
from zk_recipes._errors import (
    BadVersionError,
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    ConnectTimeoutError,
    CorruptedValueError,
    DataTooLargeError,
    InvalidPathError,
    LockLost,
    LockTimeout,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RecipeUsageError,
    RetriesExhaustedError,
    SessionLost,
    SessionMovedError,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._leader.latch import (
    CloseMode,
    ErrorPolicy,
    LeaderLatch,
    LeaderLatchListener,
    LeaderLatchStatistics,
    Participant,
)
from zk_recipes._leader.selector import LeaderSelector, LeaderSelectorStatistics, LeadershipContext
from zk_recipes._locks.lock import Contender, Lock, LockStatistics, RLock
from zk_recipes._locks.multilock import MultiLock, MultiLockStatistics
from zk_recipes._locks.rwlock import ReadLock, ReadWriteLock, WriteLock
from zk_recipes._locks.semaphore import Lease, Semaphore, SemaphoreMutex, SemaphoreStatistics
from zk_recipes._nodes.group_member import GroupMember, MembershipChange
from zk_recipes._nodes.persistent_node import (
    PersistentNode,
    PersistentNodeEvent,
    PersistentNodeState,
)
from zk_recipes._retry import (
    BoundedExponentialBackoffRetry,
    ExponentialBackoffRetry,
    PlateauRetry,
    RetryForever,
    RetryNTimes,
    RetryOneTime,
    RetryPolicy,
    RetryUntilElapsed,
    is_retryable,
    retry,
)
from zk_recipes._settings import ClientSettings, TlsOptions

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
    "ZkClient",
    "ZkRecipesError",
    "ZkTimeoutError",
    "ZnodeStat",
    "__version__",
    "digest_acl",
    "is_retryable",
    "retry",
]
