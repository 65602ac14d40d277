"""zk-recipes: ZooKeeper coordination recipes for Python, wire-compatible with Curator.

Everything public is imported from here; modules starting with ``_`` are
private. ``zk_recipes.testing`` (real-server harness, pytest plugin) is a
separate, opt-in subpackage.

Layering (each layer imports only those below it; tests/test_boundaries.py
keeps it so, tier by tier, and fails on any import cycle):

- leaves, in this order: ``_errors`` (the error tree), ``_logfields``,
  ``_threads`` (our serial executor and named threads), ``_deadline``,
  ``_paths``, ``_types`` (value types, no kazoo), ``_retry``, ``_settings``,
  ``_setting_values`` and ``_config`` (the settings table and its reader),
  ``_metrics`` (the recording interface) and ``_prometheus`` (its sink);
- ``_client/``: the session layer (Curator's curator-framework): the kazoo
  adapter (the only module that imports kazoo), the session tracker and its
  loss epoch, states and listeners, ``ZkClient`` and its create/delete
  collaborators, ``ProcessClient``;
- ``_internals/``: machinery shared by the recipe families (Curator's
  LockInternals and friends): the contender queue, the held-node validity
  model, the lock-like contract, the reconciler, lifecycles;
- the families, named after Curator's packages: ``_locks``, ``_leader``
  (may use ``_locks``), ``_barriers``, ``_counters`` (may use ``_locks``),
  ``_nodes``, and ``_inspect`` (reads what ``_locks`` and ``_leader`` write:
  ``holders()``);
- ``metrics``, then this facade, the composition root (it installs the
  default metrics sink);
- the faces: ``frameworks`` (the kit every framework face shares), ``testing``
  and ``cli``; then the integrations.

Size: over the house limit (tests/test_module_sizes.py): the facade names
every public name twice (imported, then in ``__all__``) and nothing else.

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
from zk_recipes._cache.children import (
    ChildrenCache as ChildrenCache,
    ChildrenStartMode as ChildrenStartMode,
)
from zk_recipes._cache.node import (
    NodeCache as NodeCache,
)
from zk_recipes._cache.tree import (
    TreeCache as TreeCache,
)
from zk_recipes._cache.values import (
    CachedNode as CachedNode,
    CacheEvent as CacheEvent,
    CacheEventType as CacheEventType,
)
from zk_recipes._client.client import (
    ZkClient as ZkClient,
)
from zk_recipes._client.creates import (
    CreateResult as CreateResult,
)
from zk_recipes._client.ensemble import (
    Ensemble as Ensemble,
    EnsembleConfigError as EnsembleConfigError,
    EnsembleServer as EnsembleServer,
)
from zk_recipes._client.kazoo import (
    Pending as Pending,
)
from zk_recipes._client.persistent import (
    PersistentWatch as PersistentWatch,
)
from zk_recipes._client.process import (
    ProcessClient as ProcessClient,
)
from zk_recipes._client.states import (
    ConnectionState as ConnectionState,
    StateChange as StateChange,
)
from zk_recipes._client.transaction import (
    Transaction as Transaction,
)
from zk_recipes._config import (
    DEFAULT_PREFIX as DEFAULT_PREFIX,
    SETTINGS as SETTINGS,
    RecipesConfig as RecipesConfig,
    Setting as Setting,
    Spelling as Spelling,
    read_settings as read_settings,
    settings_from_env as settings_from_env,
)
from zk_recipes._counters.atomic import (
    AtomicInt as AtomicInt,
    AtomicLong as AtomicLong,
    AtomicStats as AtomicStats,
    AtomicValue as AtomicValue,
    PromotedToLock as PromotedToLock,
)
from zk_recipes._counters.shared_count import (
    SharedCount as SharedCount,
    VersionedValue as VersionedValue,
)
from zk_recipes._errors import (
    BadVersionError as BadVersionError,
    CacheOverflowError as CacheOverflowError,
    ClientStateError as ClientStateError,
    ConfigurationError as ConfigurationError,
    ConnectionLostError as ConnectionLostError,
    ConnectTimeoutError as ConnectTimeoutError,
    CorruptedValueError as CorruptedValueError,
    DataTooLargeError as DataTooLargeError,
    EventsBehindError as EventsBehindError,
    HolderSessionLost as HolderSessionLost,
    InvalidPathError as InvalidPathError,
    LockLost as LockLost,
    LockTimeout as LockTimeout,
    NoAuthError as NoAuthError,
    NoChildrenForEphemeralsError as NoChildrenForEphemeralsError,
    NodeError as NodeError,
    NodeExistsError as NodeExistsError,
    NoNodeError as NoNodeError,
    NotEmptyError as NotEmptyError,
    NoWatcherError as NoWatcherError,
    OperationTimeoutError as OperationTimeoutError,
    OutcomeUnknown as OutcomeUnknown,
    RecipeUsageError as RecipeUsageError,
    RetriesExhaustedError as RetriesExhaustedError,
    SequenceOverflowError as SequenceOverflowError,
    SessionLost as SessionLost,
    SessionMovedError as SessionMovedError,
    TransactionFailedError as TransactionFailedError,
    TransactionOutcomeUnknown as TransactionOutcomeUnknown,
    UnavailableError as UnavailableError,
    UnreadableInstanceError as UnreadableInstanceError,
    UnsupportedFeatureError as UnsupportedFeatureError,
    WrongTypeError as WrongTypeError,
    ZkRecipesError as ZkRecipesError,
    ZkTimeoutError as ZkTimeoutError,
)
from zk_recipes._inspect.holders import (
    holders as holders,
)
from zk_recipes._inspect.holders_table import (
    holders_table as holders_table,
)
from zk_recipes._inspect.layouts import (
    RecipeLayout as RecipeLayout,
    register_layout as register_layout,
)
from zk_recipes._inspect.recipe_holders import (
    QueuedNode as QueuedNode,
    RecipeHolders as RecipeHolders,
)
from zk_recipes._internals.locklike import (
    LockLike as LockLike,
)
from zk_recipes._leader.latch import (
    LeaderLatch as LeaderLatch,
)
from zk_recipes._leader.latch_values import (
    CloseMode as CloseMode,
    LeaderLatchListener as LeaderLatchListener,
    LeaderLatchStatistics as LeaderLatchStatistics,
    LeadershipDecision as LeadershipDecision,
)
from zk_recipes._leader.participants import (
    ErrorPolicy as ErrorPolicy,
    Participant as Participant,
)
from zk_recipes._leader.selector import (
    LeaderSelector as LeaderSelector,
    LeaderSelectorStatistics as LeaderSelectorStatistics,
    LeadershipContext as LeadershipContext,
)
from zk_recipes._locks.lease import (
    Lease as Lease,
    SemaphoreStatistics as SemaphoreStatistics,
)
from zk_recipes._locks.lock import (
    Lock as Lock,
    LockStatistics as LockStatistics,
    RLock as RLock,
)
from zk_recipes._locks.multilock import (
    MultiLock as MultiLock,
    MultiLockStatistics as MultiLockStatistics,
)
from zk_recipes._locks.rwlock import (
    ReadLock as ReadLock,
    ReadWriteLock as ReadWriteLock,
    WriteLock as WriteLock,
)
from zk_recipes._locks.semaphore import Semaphore as Semaphore
from zk_recipes._locks.semaphore_mutex import (
    SemaphoreMutex as SemaphoreMutex,
)
from zk_recipes._nodes.group_member import (
    GroupMember as GroupMember,
    MembershipChange as MembershipChange,
)
from zk_recipes._nodes.persistent_node import (
    PersistentNode as PersistentNode,
    PersistentNodeEvent as PersistentNodeEvent,
    PersistentNodeState as PersistentNodeState,
)
from zk_recipes._paths import (
    validate_path as validate_path,
)
from zk_recipes._queue.delay import (
    DelayQueue as DelayQueue,
)
from zk_recipes._queue.distributed import (
    DistributedQueue as DistributedQueue,
)
from zk_recipes._queue.id_queue import (
    IdQueue as IdQueue,
)
from zk_recipes._queue.items import (
    BYTES as BYTES,
    JSON as JSON,
    QueueSerializer as QueueSerializer,
)
from zk_recipes._queue.priority import (
    PriorityQueue as PriorityQueue,
)
from zk_recipes._queue.simple import (
    SimpleQueue as SimpleQueue,
)
from zk_recipes._queue.taking import (
    ItemContext as ItemContext,
)
from zk_recipes._retry import (
    BoundedExponentialBackoffRetry as BoundedExponentialBackoffRetry,
    ExponentialBackoffRetry as ExponentialBackoffRetry,
    PlateauRetry as PlateauRetry,
    RetryForever as RetryForever,
    RetryNTimes as RetryNTimes,
    RetryOneTime as RetryOneTime,
    RetryPolicy as RetryPolicy,
    RetryUntilElapsed as RetryUntilElapsed,
    is_retryable as is_retryable,
    retry as retry,
)
from zk_recipes._settings import (
    ClientSettings as ClientSettings,
    TlsOptions as TlsOptions,
)
from zk_recipes._types import (
    CREATOR_ALL_ACL as CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE as OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE as READ_ACL_UNSAFE,
    Acl as Acl,
    Contender as Contender,
    CreateMode as CreateMode,
    Owner as Owner,
    Perms as Perms,
    WatchEvent as WatchEvent,
    WatchEventType as WatchEventType,
    ZnodeStat as ZnodeStat,
    digest_acl as digest_acl,
)
from zk_recipes.discovery import (
    DownInstancePolicy as DownInstancePolicy,
    JavaValue as JavaValue,
    ProviderStrategy as ProviderStrategy,
    RandomStrategy as RandomStrategy,
    RoundRobinStrategy as RoundRobinStrategy,
    ServiceCache as ServiceCache,
    ServiceCacheEvent as ServiceCacheEvent,
    ServiceDiscovery as ServiceDiscovery,
    ServiceInstance as ServiceInstance,
    ServiceProvider as ServiceProvider,
    ServiceType as ServiceType,
    StickyStrategy as StickyStrategy,
    UriPart as UriPart,
    UriSpec as UriSpec,
    spring_cloud_payload as spring_cloud_payload,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "BYTES",
    "CREATOR_ALL_ACL",
    "DEFAULT_PREFIX",
    "JSON",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "SETTINGS",
    "Acl",
    "AtomicInt",
    "AtomicLong",
    "AtomicStats",
    "AtomicValue",
    "BadVersionError",
    "Barrier",
    "BoundedExponentialBackoffRetry",
    "CacheEvent",
    "CacheEventType",
    "CacheOverflowError",
    "CachedNode",
    "ChildrenCache",
    "ChildrenStartMode",
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
    "DelayQueue",
    "DistributedQueue",
    "DoubleBarrier",
    "DownInstancePolicy",
    "Ensemble",
    "EnsembleConfigError",
    "EnsembleServer",
    "ErrorPolicy",
    "EventsBehindError",
    "ExponentialBackoffRetry",
    "GroupMember",
    "HolderSessionLost",
    "IdQueue",
    "InvalidPathError",
    "ItemContext",
    "JavaValue",
    "LeaderLatch",
    "LeaderLatchListener",
    "LeaderLatchStatistics",
    "LeaderSelector",
    "LeaderSelectorStatistics",
    "LeadershipContext",
    "LeadershipDecision",
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
    "NoWatcherError",
    "NodeCache",
    "NodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OperationTimeoutError",
    "OutcomeUnknown",
    "Owner",
    "Participant",
    "Pending",
    "Perms",
    "PersistentNode",
    "PersistentNodeEvent",
    "PersistentNodeState",
    "PersistentWatch",
    "PlateauRetry",
    "PriorityQueue",
    "ProcessClient",
    "PromotedToLock",
    "ProviderStrategy",
    "QueueSerializer",
    "QueuedNode",
    "RLock",
    "RandomStrategy",
    "ReadLock",
    "ReadWriteLock",
    "RecipeHolders",
    "RecipeLayout",
    "RecipeUsageError",
    "RecipesConfig",
    "RetriesExhaustedError",
    "RetryForever",
    "RetryNTimes",
    "RetryOneTime",
    "RetryPolicy",
    "RetryUntilElapsed",
    "RoundRobinStrategy",
    "Semaphore",
    "SemaphoreMutex",
    "SemaphoreStatistics",
    "SequenceOverflowError",
    "ServiceCache",
    "ServiceCacheEvent",
    "ServiceDiscovery",
    "ServiceInstance",
    "ServiceProvider",
    "ServiceType",
    "SessionLost",
    "SessionMovedError",
    "Setting",
    "SharedCount",
    "SimpleQueue",
    "Spelling",
    "StateChange",
    "StickyStrategy",
    "TlsOptions",
    "Transaction",
    "TransactionFailedError",
    "TransactionOutcomeUnknown",
    "TreeCache",
    "UnavailableError",
    "UnreadableInstanceError",
    "UnsupportedFeatureError",
    "UriPart",
    "UriSpec",
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
    "holders",
    "holders_table",
    "is_retryable",
    "read_settings",
    "register_layout",
    "retry",
    "settings_from_env",
    "spring_cloud_payload",
    "validate_path",
]


def _fixup_module_metadata(module_name: str, namespace: dict[str, object]) -> None:
    """Make every public object say it lives in ``zk_recipes`` (trio's fixup_module_metadata)."""
    seen: set[int] = set()

    def fix(name: str, qualname: str, obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        # A private module of the core, or of a public family (zk_recipes.discovery._x).
        if not isinstance(module, str) or not (
            module.startswith("zk_recipes._") or module.startswith("zk_recipes.discovery._")
        ):
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

# The composition root picks the metrics implementation (zk_recipes/metrics.py),
# so that importing a recipe's module alone registers nothing anywhere.
from zk_recipes.metrics import _install_default  # noqa: E402

_install_default()
del _install_default
