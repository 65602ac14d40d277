"""Guaranteed delete: keep trying in the background until the node is gone.

A recipe that releases a node while the connection is down must not forget
it: the node would block everyone until the session expires (kazoo #732,
Curator's FailedDeleteManager). A failed delete is queued here and retried
whenever the client is connected, until the node is gone. A node that now
belongs to another session is never deleted: after our session was lost,
a node at the same path may be someone else's.

Each attempt deletes only the node it looked at: an ``exists`` first, then
the delete at the version it saw (or the one asked for), so a node made
again at the path in between is not taken for the one asked about; with a
``czxid`` (the node the caller meant), a node with another one is left
alone. A delete asked *as the holder* of a node (``bound``: a queue claim, a
registered instance) goes out only on the session that made it
(``kazoo/bound.py``); once that session has ended, the node went with it and
the delete is done. ``cancel(path)`` drops a pending delete of a node the
recipe took back as its own, waiting for an attempt under way.

Logs (logger ``zk_recipes.client``, fields ``zk_event``/``zk_path``/``zk_session_id``):
``delete.queued`` when a delete goes to the background (the client logs
it), ``delete.done`` when a background delete finished, ``delete.skipped``
when the node turned out to be another session's, ``delete.failed`` when
it failed for good. ``pending_count()`` feeds the pending-deletes gauge.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from zk_recipes._client.kazoo import Pending
from zk_recipes._client.steps import Reply, Steps
from zk_recipes._errors import (
    BadVersionError,
    ConnectionLostError,
    HolderSessionLost,
    NoNodeError,
    SessionLost,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._logfields import fields
from zk_recipes._types import ZnodeStat

log = logging.getLogger("zk_recipes.client")


class _Deleting(Protocol):
    """What the deleter needs from the client (absolute paths)."""

    def _exists_abs(self, path: str) -> ZnodeStat | None: ...
    def _delete_abs(
        self, path: str, version: int, still: Callable[[], bool] | None = None
    ) -> None: ...
    def _holder_check(self, session: int) -> Callable[[], bool]: ...
    def _wait_usable(self, timeout: float) -> bool: ...
    def _rel(self, path: str) -> str: ...
    @property
    def session_id(self) -> int: ...


@dataclasses.dataclass
class _PendingDelete:
    path: str
    version: int
    #: The session that owned the node when the delete was asked for (0 = any).
    session_id: int
    #: Asked as the holder of ``session_id``'s node: sent on that session only.
    bound: bool = False
    #: The node meant (0: whichever is at the path).
    czxid: int = 0


class GuaranteedDeleter:
    """The client's queue of deletes to finish: one worker thread while anything is pending.

    ``add()`` queues a path (the latest request per path wins); the worker
    tries whenever the client is connected, with capped back-off between
    rounds that failed, until each node is gone or found to belong to another
    session. ``stop()`` (at close) drops what is left: the session's ephemeral
    nodes go with it anyway.
    """

    def __init__(self, client: _Deleting, backoff: Callable[[int], float]) -> None:
        self._client = client
        self._backoff = backoff
        self._lock = threading.Lock()
        self._pending: dict[str, _PendingDelete] = {}
        self._changed = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        self._stopped = False
        #: The path the worker is attempting now (``cancel`` waits for it).
        self._attempting: str | None = None

    def add(
        self,
        path: str,
        version: int,
        session_id: int,
        *,
        bound: bool = False,
        czxid: int | None = None,
    ) -> None:
        with self._lock:
            if self._stopped:
                return
            self._pending[path] = _PendingDelete(path, version, session_id, bound, czxid or 0)
            self._changed.notify_all()
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name="zk-recipes guaranteed delete", daemon=True
                )
                self._worker.start()

    def cancel(self, path: str, timeout: float) -> bool:
        """Drop the pending delete of ``path``; True if there was one (see the module note).

        An attempt under way on ``path`` is waited for (up to ``timeout``): once
        this returns, nothing queued before it deletes ``path``.
        """
        with self._changed:
            found = self._pending.pop(path, None) is not None
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._attempting != path, timeout)
            return found

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._pending)

    def pending_count(self) -> int:
        """Deletes still to finish (0 once stopped: the session took its nodes along)."""
        return 0 if self._stopped else len(self._pending)

    def wait_empty(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending, timeout)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._changed.notify_all()

    def try_once(self, item: _PendingDelete) -> bool:
        """One attempt; True when the node is gone (or not ours), False to retry later."""
        client = self._client
        path = client._rel(item.path)
        try:
            stat = client._exists_abs(item.path)
            if stat is not None:
                owner = stat.ephemeral_owner
                holder = item.session_id or client.session_id
                if (owner and owner != holder) or (item.bound and not owner):
                    log.info(
                        "not deleting %s: it now belongs to session %#x",
                        path,
                        owner,
                        extra=fields("delete.skipped", path=path, session_id=owner),
                    )
                    return True
                if item.czxid and stat.czxid != item.czxid:
                    log.info(
                        "not deleting %s: the node there was made again since the delete was "
                        "asked for",
                        path,
                        extra=fields("delete.skipped", path=path, session_id=owner),
                    )
                    return True
                still = client._holder_check(item.session_id) if item.bound else None
                version = stat.version if item.version == -1 else item.version
                client._delete_abs(item.path, version, still)
        except NoNodeError:
            pass
        except HolderSessionLost:
            pass  # the holder's session ended: its node went with it
        except BadVersionError:
            if item.version == -1:
                return False  # written since our look: look again
            log.info(
                "not deleting %s: it changed since version %d was asked for",
                path,
                item.version,
                extra=fields("delete.skipped", path=path, session_id=item.session_id),
            )
            return True
        except (SessionLost, ConnectionLostError):
            return False
        except ZkRecipesError:
            log.warning(
                "guaranteed delete of %s failed for good",
                path,
                exc_info=True,
                extra=fields("delete.failed", path=path, session_id=item.session_id),
            )
            return True
        log.info(
            "guaranteed delete of %s done",
            path,
            extra=fields("delete.done", path=path, session_id=item.session_id),
        )
        return True

    def _run(self) -> None:
        attempt = 0
        while True:
            with self._lock:
                if self._stopped or not self._pending:
                    self._worker = None
                    self._changed.notify_all()
                    return
                items = list(self._pending.values())
            if not self._client._wait_usable(1.0):
                continue
            failed = False
            for item in items:
                with self._lock:
                    if self._pending.get(item.path) is not item:
                        continue  # cancelled, or asked again since
                    self._attempting = item.path
                try:
                    done = self.try_once(item)
                finally:
                    with self._lock:
                        self._attempting = None
                        if done and self._pending.get(item.path) is item:
                            del self._pending[item.path]
                        self._changed.notify_all()
                failed = failed or not done
            if failed:
                attempt += 1
                with self._lock:
                    self._changed.wait(self._backoff(attempt))
            else:
                attempt = 0


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One delete asked of the client: what a background retry needs of it."""

    full: str
    version: int
    owner: int
    bound: bool
    czxid: int | None
    #: The path as the caller named it (for the log).
    shown: str


def attempt_steps(
    send: Callable[[], Pending[None]],
    timeout: float,
    deleter: GuaranteedDeleter | None,
    attempt: Attempt,
) -> Steps[None]:
    """One delete, as steps (_client/steps.py): ``send()`` it and wait ``timeout`` for the reply.

    A node already gone is done. With a ``deleter`` (a guaranteed delete), a
    lost connection or session, or a holder's session ended, hands the delete to
    it instead of raising.
    """
    try:
        yield Reply(send(), timeout)
    except NoNodeError:
        pass
    except HolderSessionLost:
        if deleter is None:
            raise
    except (ConnectionLostError, ZkTimeoutError, SessionLost):
        if deleter is None:
            raise
        log.info(
            "delete of %s failed; retrying in the background",
            attempt.shown,
            extra=fields("delete.queued", path=attempt.shown, session_id=attempt.owner),
        )
        deleter.add(
            attempt.full, attempt.version, attempt.owner, bound=attempt.bound, czxid=attempt.czxid
        )
