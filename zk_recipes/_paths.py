"""Znode paths, node data limits and Curator's protected names.

Everything here is checked before a request is sent: a bad path or an
oversized payload must fail with a message that says what to change, not as
a dropped connection (a packet over ``jute.maxbuffer`` makes the server
close the socket, which kazoo reports as a plain connection loss).

Protected names (Curator's ProtectedUtils): ``_c_`` + a 36-character
lower-case UUID + ``-`` + the requested name. The UUID lets a client find
the node it created when the reply to its create was lost.
"""

from __future__ import annotations

import re
import uuid

from zk_recipes._errors import DataTooLargeError, InvalidPathError, WrongTypeError

#: ZooKeeper's default jute.maxbuffer is 0xfffff bytes for a whole packet;
#: keep 1 KiB for the path, ACLs and framing so a full node still fits.
DEFAULT_MAX_DATA_BYTES = 0xFFFFF - 1024
#: What a request may hold besides node data: the client sends requests of up to
#: ``max_data_bytes + REQUEST_RESERVE`` bytes, exactly jute.maxbuffer by default.
REQUEST_RESERVE = 1024

PROTECTED_PREFIX = "_c_"
_PROTECTED_ID_LEN = 36
_PROTECTED_HEAD_LEN = len(PROTECTED_PREFIX) + _PROTECTED_ID_LEN + 1  # 40

# Characters ZooKeeper's PathUtils.validatePath refuses.
_BAD_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


def validate_path(path: object, *, what: str = "path", writable: bool = False) -> str:
    """Return ``path`` if ZooKeeper would accept it, else raise InvalidPathError.

    The message names every problem of the path at once (a relative path with
    a trailing slash and a ``..`` is three), so one round of fixing does.
    ``writable`` refuses ZooKeeper's own subtree, ``/zookeeper``, too, and the
    root. ``what`` names the path in the message: ``"namespace"``, ``"PATH"``.
    """
    if not isinstance(path, str):
        raise InvalidPathError(
            f"{what} must be a str like '/app/locks/x', got {type(path).__name__}"
        )
    # The common case first, cheaply: every request's path passes here.
    if path == "/" and not writable:
        return path
    if (
        path.startswith("/")
        and not path.endswith("/")
        and "//" not in path
        and ("/." not in path or not _dot_segments(path))
        and _BAD_CHARS.search(path) is None
        and not (writable and _is_reserved(path))
    ):
        return path
    raise InvalidPathError(f"{what} {path!r} {'; '.join(path_problems(path, writable=writable))}")


def path_problems(path: str, *, writable: bool = False) -> list[str]:
    """What is wrong with ``path``, each as a phrase that follows it; empty when nothing is."""
    if path == "/":
        return [_RESERVED] if writable else []
    problems: list[str] = []
    if not path.startswith("/"):
        problems.append("is relative: znode paths start with '/'")
    if path.endswith("/"):
        problems.append("ends with '/': drop the trailing slash")
    if "//" in path:
        problems.append("has an empty segment ('//')")
    dots = _dot_segments(path)
    if dots:
        listed = " and ".join(repr(dot) for dot in dots)
        plural = "s" if len(dots) > 1 else ""
        problems.append(f"has {'a ' if not plural else ''}relative segment{plural} {listed}")
    bad = _BAD_CHARS.search(path)
    if bad is not None:
        problems.append(
            f"contains the character {bad.group()!r} (U+{ord(bad.group()):04X}), which "
            "ZooKeeper does not allow"
        )
    if writable and _is_reserved(path):
        problems.append(_RESERVED)
    return problems


_RESERVED = "is reserved by ZooKeeper; use a path of your own, like '/app/...'"


def _dot_segments(path: str) -> list[str]:
    """The distinct ``.`` and ``..`` segments of ``path``, in order."""
    found: list[str] = []
    for segment in path.split("/"):
        if segment in (".", "..") and segment not in found:
            found.append(segment)
    return found


def _is_reserved(path: str) -> bool:
    return path == "/" or path == "/zookeeper" or path.startswith("/zookeeper/")


def validate_writable_path(path: object, *, what: str = "path") -> str:
    """Like validate_path, and refuse ZooKeeper's own reserved subtree."""
    return validate_path(path, what=what, writable=True)


def normalize_namespace(namespace: object) -> str:
    """Turn ``"app"``, ``"/app"`` or ``"app/sub"`` into ``"/app..."``; ``""``/None mean none."""
    if namespace is None or namespace == "":
        return ""
    if not isinstance(namespace, str):
        raise InvalidPathError(
            f"namespace must be a str like 'myapp', got {type(namespace).__name__}"
        )
    full = namespace if namespace.startswith("/") else "/" + namespace
    return validate_writable_path(full, what="namespace")


def join(parent: str, *names: str) -> str:
    """Join path segments: ``join('/a', 'b', 'c') == '/a/b/c'``."""
    path = parent.rstrip("/")
    for name in names:
        path = f"{path}/{name.strip('/')}"
    return path or "/"


def parent_of(path: str) -> str:
    """The parent path ('/' for a top-level node)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name_of(path: str) -> str:
    """The last segment of ``path``."""
    return path.rsplit("/", 1)[-1]


def validate_data(data: object, *, path: str, limit: int = DEFAULT_MAX_DATA_BYTES) -> bytes:
    """Return ``data`` as bytes, or raise when it is not bytes or will not fit in a node."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise WrongTypeError(
            f"node data for {path} must be bytes, got {type(data).__name__}; "
            "encode text first, e.g. value.encode('utf-8')"
        )
    if len(data) > limit:
        raise DataTooLargeError(
            f"node data for {shortened(path)} is {len(data):,} bytes; the limit is "
            f"{limit:,} bytes (max_data_bytes, under ZooKeeper's jute.maxbuffer, about 1 MB). "
            "Keep large blobs elsewhere and store a reference in ZooKeeper; or, where every "
            "server's jute.maxbuffer is raised, set the client's max_data_bytes to 1024 under it."
        )
    return data


def max_request_bytes(max_data_bytes: int) -> int:
    """The largest request the client sends, as the server counts it (xid, type and body).

    The server reads a request's length first and, when it is over its
    ``jute.maxbuffer``, closes the connection without an answer: the client
    would see a dropped connection, reconnect and send the same request again.
    """
    return max_data_bytes + REQUEST_RESERVE


def shortened(path: str, keep: int = 60) -> str:
    """``path`` for a message: its head and tail around ``...`` when it is long."""
    if len(path) <= keep:
        return path
    tail = keep // 3
    return f"{path[: keep - tail]}...{path[-tail:]} ({len(path):,} characters)"


def request_too_large(what: str, path: str, size: int, limit: int) -> DataTooLargeError:
    """The error for a request over ``limit`` bytes (``max_request_bytes``), not sent."""
    return DataTooLargeError(
        f"the {what} request for {shortened(path)} is {size:,} bytes; ZooKeeper takes "
        f"requests of up to {limit:,} bytes (its jute.maxbuffer) and drops the connection "
        "of a larger one, so it was not sent. Use a shorter name or path, less data or "
        "fewer ACL entries; or, where every server's jute.maxbuffer is raised, set the "
        "client's max_data_bytes to 1024 under it."
    )


def new_protected_id() -> str:
    """A fresh id for one protected create (Curator: UUID.randomUUID().toString())."""
    return str(uuid.uuid4())


def protected_prefix(protected_id: str) -> str:
    """The name prefix every node of this protected create starts with."""
    return f"{PROTECTED_PREFIX}{protected_id}-"


def is_protected_name(name: str) -> bool:
    """True for names made by a protected create (Curator's recognition rule)."""
    if len(name) <= _PROTECTED_HEAD_LEN or not name.startswith(PROTECTED_PREFIX):
        return False
    if name[_PROTECTED_HEAD_LEN - 1] != "-":
        return False
    try:
        uuid.UUID(name[len(PROTECTED_PREFIX) : _PROTECTED_HEAD_LEN - 1])
    except ValueError:
        return False
    return True


def strip_protection(name: str) -> str:
    """The requested name without the ``_c_<uuid>-`` head (unchanged if not protected)."""
    return name[_PROTECTED_HEAD_LEN:] if is_protected_name(name) else name
