"""ProcessClient: one ZkClient per process, created lazily, never shared across fork().

Why: a kazoo client started before ``fork()`` is dead in the child (its
threads do not survive; kazoo#519/#554), and closing it there would close the
*parent's* session. Pre-fork servers (Celery prefork, gunicorn ``--preload``,
uWSGI, multiprocessing) fork after import, so every framework integration
keeps its client here: ``get()`` checks the process id and builds a new
client in a child; the parent's client is dropped without a word to the
server (``ZkClient`` marks it forked, and ``close()`` of a forked client only
discards it).

A client whose kazoo connection thread died rebuilds its connection by
itself (ZkClient); one that was closed is replaced by the next ``get()``.

``start_in_background()`` lets a start-up hook that must return quickly
(Celery kills a prefork child whose ``worker_process_init`` takes more than
a few seconds) begin connecting without waiting; ``get()`` then waits for
that connection up to its timeout.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import final

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import (
    ConnectTimeoutError,
    UnavailableError,
    WrongTypeError,
    ZkRecipesError,
)
from zk_recipes._settings import ClientSettings

log = logging.getLogger("zk_recipes.process")

_registries: weakref.WeakSet[ProcessClient] = weakref.WeakSet()

#: The longest ``available()`` waits for a process's first connection.
FIRST_CONNECT_WAIT = 1.0
#: How often that wait looks for a failed attempt.
_LOOK_EVERY = 0.05


def _forget_in_child() -> None:
    # A lock held by another thread at fork time stays held forever in the
    # child; give every registry a fresh one and forget the parent's client.
    for registry in list(_registries):
        registry._reset_after_fork()


os.register_at_fork(after_in_child=_forget_in_child)


@final
class ProcessClient:
    """The process's client for one configuration: ``ProcessClient(settings).get()``.

    ``settings`` may be a callable, read on first use in each process, so a
    framework can build it from configuration that is complete only later.
    """

    def __init__(self, settings: ClientSettings | Callable[[], ClientSettings]) -> None:
        if not (isinstance(settings, ClientSettings) or callable(settings)):
            raise WrongTypeError(f"settings must be ClientSettings or a callable, got {settings!r}")
        self._settings_source = settings
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._client: ZkClient | None = None
        self._starter: threading.Thread | None = None
        #: The client whose first connection ``available()`` waits for, and until when.
        self._first_wait: tuple[ZkClient | None, float] = (None, 0.0)
        _registries.add(self)

    def __repr__(self) -> str:
        client = self._client if self._pid == os.getpid() else None
        return f"<ProcessClient pid={os.getpid()} client={client!r}>"

    @property
    def settings(self) -> ClientSettings:
        source = self._settings_source
        return source if isinstance(source, ClientSettings) else source()

    def current(self) -> ZkClient | None:
        """This process's client if one was made (started or starting), else None."""
        with self._lock:
            self._check_pid()
            return self._client

    def get(self, timeout: float | None = None, *, refused_ends: bool = False) -> ZkClient:
        """The connected client of this process; creates and starts it on first use.

        Waits up to ``timeout`` (default: the settings' ``connection_timeout``)
        and raises ConnectTimeoutError naming the ensemble if it cannot connect;
        with ``refused_ends``, as soon as every server refused (``ZkClient.start``).
        """
        client = self._client_for_this_process()
        if timeout is None:
            timeout = client.settings.connection_timeout
        # or wait for start_in_background()'s start, or retry it
        client.start(timeout, refused_ends=refused_ends)
        if not client.wait_connected(timeout):
            raise ConnectTimeoutError(
                f"no connection to ZooKeeper at {client.connect_string} within {timeout:g}s "
                "(the client is still trying); check that the ensemble is up and reachable"
            )
        return client

    def available(self, wait: float = FIRST_CONNECT_WAIT) -> ZkClient:
        """The client if it is connected now; UnavailableError at once if it is not.

        For faces that must answer at once (a locked view, a health check):
        CONNECTED or RECONNECTED returns the client. Before this process's
        first connection, the client is started in the background and waited
        for up to ``wait`` seconds (a healthy ensemble answers in
        milliseconds), once (every caller of that time waits for the same
        deadline): when that wait ran out, or every server has refused the
        connection already (nothing listens), or the
        connection is SUSPENDED or the session LOST and being replaced, it
        raises at once, naming the state and the connection's newest problem.
        The client keeps trying in the background meanwhile.
        """
        client = self._client_for_this_process()
        state = client.state
        if state is not None and state.is_connected:
            return client
        if not client.is_started:
            self.start_in_background()
        if state is None and not self._hopeless(client):
            # Every caller of the first second waits for the same first connection;
            # after it, callers answer at once until the client connects.
            with self._lock:
                if self._first_wait[0] is not client:
                    self._first_wait = (client, time.monotonic() + wait)
                until = self._first_wait[1]
            # Looked at in short steps: every server refusing, or a start that failed
            # (no host name resolves), ends the wait at once; they set no event. One
            # refusal does not: the next server may answer.
            while (left := until - time.monotonic()) > 0 and not self._hopeless(client):
                if client.wait_connected(min(left, _LOOK_EVERY)):
                    return client
        state = client.state
        if state is not None and state.is_connected:
            return client
        problem = client.connection_problem
        if state is None:
            what = f"no connection to ZooKeeper at {client.connect_string} yet"
        else:
            what = f"the connection to ZooKeeper at {client.connect_string} is {state.name}"
        raise UnavailableError(
            f"{what}{f' ({problem})' if problem else ''}; the client keeps trying in the "
            "background",
            problem,
        )

    def _hopeless(self, client: ZkClient) -> bool:
        """No connection can come of the attempts under way: waiting for one is pointless."""
        if client._refused_everywhere:
            return True
        starter = self._starter
        return not client.is_started and starter is not None and not starter.is_alive()

    def start_in_background(self) -> None:
        """Begin connecting without waiting; failures are logged and retried by ``get()``."""
        client = self._client_for_this_process()
        with self._lock:
            if client.is_started or (self._starter is not None and self._starter.is_alive()):
                return

            def start() -> None:
                try:
                    client.start()
                except ZkRecipesError as exc:
                    if client.is_closed:  # close() ended the start: shutting down, not a fault
                        log.debug("background start ended by close(): %s", exc)
                    else:
                        log.warning("connecting to ZooKeeper in the background failed: %s", exc)

            self._starter = threading.Thread(
                target=start, name="zk-recipes process client start", daemon=True
            )
            self._starter.start()

    def close(self) -> None:
        """Close this process's client (its ephemeral nodes go at once). Idempotent.

        A client inherited from a parent process is only forgotten here.
        """
        with self._lock:
            self._check_pid()
            client, self._client = self._client, None
            starter, self._starter = self._starter, None
        if client is not None:
            client.close()
        if starter is not None and starter is not threading.current_thread():
            starter.join(1.0)

    # -- internals ---------------------------------------------------------
    def _client_for_this_process(self) -> ZkClient:
        with self._lock:
            self._check_pid()
            client = self._client
            if client is None or client.is_closed:
                client = self._client = ZkClient(settings=self.settings)
                self._starter = None
            return client

    def _check_pid(self) -> None:
        if self._pid != os.getpid():  # forked without our at-fork hook (uWSGI forks from C)
            self._pid = os.getpid()
            self._client = None
            self._starter = None

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._client = None
        self._starter = None
