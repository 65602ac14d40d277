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


def validate_path(path: object, *, what: str = "path") -> str:
    """Return ``path`` if ZooKeeper would accept it, else raise InvalidPathError."""
    if not isinstance(path, str):
        raise InvalidPathError(
            f"{what} must be a str like '/app/locks/x', got {type(path).__name__}"
        )
    if not path.startswith("/"):
        raise InvalidPathError(f"{what} {path!r} is relative: znode paths start with '/'")
    if path == "/":
        return path
    if path.endswith("/"):
        raise InvalidPathError(f"{what} {path!r} ends with '/': drop the trailing slash")
    bad = _BAD_CHARS.search(path)
    if bad is not None:
        raise InvalidPathError(
            f"{what} {path!r} contains the character {bad.group()!r} "
            f"(U+{ord(bad.group()):04X}), which ZooKeeper does not allow"
        )
    for segment in path[1:].split("/"):
        if segment == "":
            raise InvalidPathError(f"{what} {path!r} has an empty segment ('//')")
        if segment in (".", ".."):
            raise InvalidPathError(f"{what} {path!r} has a relative segment {segment!r}")
    return path


def validate_writable_path(path: object, *, what: str = "path") -> str:
    """Like validate_path, and refuse ZooKeeper's own reserved subtree."""
    checked = validate_path(path, what=what)
    if checked == "/" or checked == "/zookeeper" or checked.startswith("/zookeeper/"):
        raise InvalidPathError(
            f"{what} {checked!r} is reserved by ZooKeeper; use a path of your own, like '/app/...'"
        )
    return checked


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
