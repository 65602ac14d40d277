"""The typed requests of a connection: every request of ours is built, checked and sent here.

``create_async``, ``get_async`` and the rest take absolute paths and answer
with a ``Pending`` (pending.py) of our own types. ``_send`` is the one door:
it checks the request's size against the server's limit, refuses a write
as the holder of a node whose session is not the connection's (``bound.py``),
writes the request from the caller's thread when it may (``direct_send.py``)
and else through kazoo's queue, which ``_admit`` keeps from filling while
disconnected. ``KazooConnection`` (connection.py) adds the kazoo client these
requests go out on, its life and its bookkeeping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import kazoo.exceptions as kz_exc
from kazoo.protocol.serialization import (
    CheckVersion,
    Create2,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Reconfig,
    SetData,
    Sync,
)

from zk_recipes import _errors as errors, _paths
from zk_recipes._client.direct_send import DirectSender
from zk_recipes._client.kazoo.bound import Bound, Still, refused
from zk_recipes._client.kazoo.failures import translate
from zk_recipes._client.kazoo.multi import Multi, TxOp
from zk_recipes._client.kazoo.pending import Pending, new_result
from zk_recipes._client.kazoo.records import (
    EVENT_TYPES,
    HEADER_BYTES,
    REQUEST_NAMES,
    CreateContainer,
    CreateTTL,
    kazoo_acl,
    stat_of,
)
from zk_recipes._types import (
    Acl,
    CreateMode,
    WatchCallback,
    WatchEvent,
    WatchEventType,
    ZnodeStat,
    is_inline,
    mark_inline,
)

T = TypeVar("T")

#: Requests kazoo may hold queued while disconnected (see ``_admit``); a socket
#: pair holds a few hundred 1-byte wake-ups before a writer blocks.
_MAX_QUEUED_DISCONNECTED = 128


class TypedRequests:
    """Requests with absolute paths, answered by a ``Pending`` of our types."""

    _kz: Any
    _acl: Any
    _max_request: int
    _direct: DirectSender
    _event_path: Callable[[str], str] | None
    #: True once the connection is being stopped by us (Pending reads it).
    stopping: bool

    def create_async(
        self,
        path: str,
        data: bytes,
        mode: CreateMode,
        acl: Sequence[Acl] | None = None,
        ttl: float | None = None,
    ) -> Pending[tuple[str, ZnodeStat]]:
        kacl = kazoo_acl(acl) if acl is not None else self._acl
        request: Any
        if mode is CreateMode.CONTAINER:
            request = CreateContainer(path, data, kacl, mode.value)
        elif mode.is_ttl:
            if ttl is None:
                raise errors.ConfigurationError(f"{mode.name} needs ttl= (seconds)")
            request = CreateTTL(path, data, kacl, mode.value, int(ttl * 1000))
        else:
            request = Create2(path, data, kacl, mode.value)
        return self._call(request, path, lambda r: (str(r[0]), stat_of(r[1])))

    def reconfig_async(
        self, joining: str | None, leaving: str | None, new_members: str | None, from_config: int
    ) -> Pending[tuple[bytes, ZnodeStat]]:
        """Dynamic reconfiguration (incremental: joining/leaving; or new_members); the new
        config's data and stat. The server needs reconfigEnabled=true and a super user (or
        skipACL)."""
        request = Reconfig(joining, leaving, new_members, from_config)
        path = "/zookeeper/config"
        return self._call(request, path, lambda r: (bytes(r[0] or b""), stat_of(r[1])))

    def get_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[tuple[bytes, ZnodeStat]]:
        raw = self._send(GetData(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: (bytes(r[0] or b""), stat_of(r[1])), self)

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[list[str]]:
        raw = self._send(GetChildren(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: [str(c) for c in r], self)

    def exists_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[ZnodeStat | None]:
        raw = self._send(Exists(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: stat_of(r) if r is not None else None, self)

    def set_async(
        self, path: str, data: bytes, version: int = -1, still: Still | None = None
    ) -> Pending[ZnodeStat]:
        raw = self._send(SetData(path, data, version), path, still)
        return Pending(raw, path, stat_of, self)

    def delete_async(
        self, path: str, version: int = -1, still: Still | None = None
    ) -> Pending[None]:
        raw = self._send(Delete(path, version), path, still)
        return Pending(raw, path, lambda r: None, self)

    def multi_async(
        self, ops: Sequence[TxOp], still: Still | None = None
    ) -> Pending[list[tuple[object, ...]]]:
        """One multi of ``ops``; its results in order, stats ours, errors translated.

        ``still``: written only while it says the holder's session is the
        connection's (``bound.py``); ``HolderSessionLost`` otherwise, unsent.

        Each result: ``("create", path, stat | None)``, ``("set", stat)``,
        ``("delete",)``, ``("check",)``, or ``("error", error | None)`` when
        the multi failed (None for an operation rolled back or not run).
        """
        records: list[Any] = []
        for op in ops:
            if op.kind == "create":
                acl = kazoo_acl(op.acl) if op.acl is not None else self._acl  # type: ignore[arg-type]
                if op.mode == 4:
                    records.append(CreateContainer(op.path, op.data, acl, op.mode))
                elif op.mode in (5, 6):
                    records.append(CreateTTL(op.path, op.data, acl, op.mode, op.ttl))
                else:
                    records.append(Create2(op.path, op.data, acl, op.mode))
            elif op.kind == "set":
                records.append(SetData(op.path, op.data, op.version))
            elif op.kind == "delete":
                records.append(Delete(op.path, op.version))
            else:
                records.append(CheckVersion(op.path, op.version))

        def convert(raw: Any) -> list[tuple[object, ...]]:
            out: list[tuple[object, ...]] = []
            for op, result in zip(ops, raw, strict=True):
                if result[0] == "create":
                    stat = stat_of(result[2]) if result[2] is not None else None
                    out.append(("create", str(result[1]), stat))
                elif result[0] == "set":
                    out.append(("set", stat_of(result[1])))
                elif result[0] == "error":
                    code = int(result[1])
                    failed = code not in (0, -2)  # 0: rolled back; -2: not run
                    error = translate(kz_exc.EXCEPTIONS[code](), op.path) if failed else None
                    out.append(("error", error))
                else:
                    out.append(result)
            return out

        path = ops[0].path if ops else "/"
        return Pending(self._send(Multi(records), path, still), path, convert, self)

    def sync_async(self, path: str) -> Pending[None]:
        raw = self._send(Sync(path), path)
        return Pending(raw, path, lambda r: None, self)

    def _admit(self, path: str) -> None:
        """Refuse a request while disconnected once many already wait to be sent.

        kazoo queues requests made while it is not connected and wakes its
        connection thread with one byte per request on a socket pair, read back
        only as each is sent. A long outage with requests made meanwhile (a
        status poll every second, say) fills that socket after a few hundred,
        and from then on every caller, ``close()`` included, blocks forever in
        kazoo's ``send``. Past ``_MAX_QUEUED_DISCONNECTED`` a request fails at
        once with ConnectionLostError instead: retryable, and nothing is queued.
        """
        kz = self._kz
        if len(kz._queue) >= _MAX_QUEUED_DISCONNECTED and not kz.connected:
            raise errors.ConnectionLostError(
                f"{path}: not connected to ZooKeeper, and {len(kz._queue)} requests already "
                "wait to be sent; try again once connected"
            )

    def _call(self, request: Any, path: str, convert: Callable[[Any], T]) -> Pending[T]:
        return Pending(self._send(request, path), path, convert, self)

    def _send(self, request: Any, path: str, still: Still | None = None) -> Any:
        """Send ``request``: written by this thread when it may, else through kazoo's queue.

        ``still``: a write as the holder of a node, sent only while the holder's
        session is the connection's (``bound.py``): checked now, and again by
        whoever writes it.

        Every request of ours passes here, so this is where its size is checked:
        the server drops the connection of a request over its jute.maxbuffer
        (docs/settings.md, max_data_bytes), and kazoo would send it again on
        every reconnect. The body serialized for the check is the one a direct
        send writes; kazoo's queue serializes it again.
        """
        body = request.serialize()
        if len(body) + HEADER_BYTES > self._max_request:
            raise _paths.request_too_large(
                REQUEST_NAMES.get(request.type, "ZooKeeper"),
                self._shown(path),
                len(body) + HEADER_BYTES,
                self._max_request,
            )
        raw = new_result(self._kz)
        if still is not None:
            request = Bound(request, still, self._shown(path))
            if refused(request, raw):
                return raw
        if self._direct.send(request, raw, body):
            return raw
        self._admit(path)
        if self._kz._call(request, raw) is False:
            raise translate(raw.exception, path, stopped=self.stopping)
        return raw

    def _shown(self, path: str) -> str:
        """``path`` as callers name it (without the client's namespace)."""
        return path if self._event_path is None else self._event_path(path)

    def _watcher(self, watch: WatchCallback | None) -> Callable[[Any], None] | None:
        if watch is None:
            return None

        event_path = self._event_path

        def _fire(event: Any) -> None:
            path = event.path
            if event_path is not None:
                path = event_path(path) if path else None
            watch(WatchEvent(EVENT_TYPES.get(event.type, WatchEventType.NONE), path))

        _fire.__wrapped__ = watch  # type: ignore[attr-defined]  # forget_data_watch finds it
        if is_inline(watch):
            mark_inline(_fire)
        return _fire
