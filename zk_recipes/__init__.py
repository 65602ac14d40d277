"""zk-recipes: ZooKeeper coordination recipes, Curator-compatible."""

from __future__ import annotations

from zk_recipes._errors import (
    BadVersionError,
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    ConnectTimeoutError,
    DataTooLargeError,
    InvalidPathError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RetriesExhaustedError,
    SessionLost,
    SessionMovedError,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "BadVersionError",
    "ClientStateError",
    "ConfigurationError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "DataTooLargeError",
    "InvalidPathError",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OperationTimeoutError",
    "RetriesExhaustedError",
    "SessionLost",
    "SessionMovedError",
    "UnsupportedFeatureError",
    "ZkRecipesError",
    "ZkTimeoutError",
    "__version__",
]
