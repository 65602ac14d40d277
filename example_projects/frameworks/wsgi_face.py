"""A face of our own, on the framework kit alone: `python example_projects/frameworks/wsgi_face.py`.

A plain WSGI app (the standard library's wsgiref, no framework) gets what
Django's ``@zk_lock`` and Flask's ``@zk.locked`` give: a lock per call named
from the view's arguments, 423 when it is held elsewhere, 503 at once when
ZooKeeper cannot be reached, the held lock shown to the view, and a status
page of who holds what. Everything here that is not about WSGI is
``zk_recipes.frameworks`` (docs/frameworks.md).

The demo starts a throwaway ZooKeeper, serves the app on a free port, sends
three requests for one invoice at once (one is served, two answer 423, and
the one served holds its lock until the demo tells it to finish), prints the
status page, then pauses the server: the next request answers 503, not 423.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from zk_recipes import DEFAULT_PREFIX, ClientSettings, ProcessClient, holders
from zk_recipes.frameworks import (
    RETRY_AFTER,
    HeldLock,
    HeldLocks,
    LockNameTemplate,
    LockPlan,
    LockTarget,
    check_on_busy,
    check_on_unavailable,
    connection_report,
    connection_rows,
    locked_call,
    recipe_rows,
)
from zk_recipes.testing import ZooKeeperServer

StartResponse = Callable[[str, list[tuple[str, str]]], object]
Answer = tuple[int, str]


class Request:
    """The little a view needs: the path's arguments and a place to show the lock."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.environ = environ
        self.zk_lock: HeldLock | None = None


class ZkFace:
    """The face: one client per process, a lock decorator, a status page."""

    def __init__(self, settings: ClientSettings, prefix: str = DEFAULT_PREFIX) -> None:
        # One session per process, made on first use (and anew after a fork).
        self.process_client = ProcessClient(settings)
        self.prefix = prefix
        self.held = HeldLocks(
            "wsgi_face.held",
            logging.getLogger("wsgi_face"),
            "current_lock(): no lock is held here; call it inside a view decorated with @locked",
        )

    # --8<-- [start:decorator]
    # given: inspect, Callable, Answer, _refuse, _attach_to_request, _unavailable (the file above)
    # given: LockNameTemplate, LockPlan, LockTarget, locked_call (zk_recipes.frameworks')
    # given: check_on_busy, check_on_unavailable (zk_recipes.frameworks')
    def locked(
        self, name: str, *, timeout: float | None = 0.0, on_busy: int = 423
    ) -> Callable[[Callable[..., Answer]], Callable[..., Answer]]:
        """``@face.locked("invoice-{number}")``: the view runs only while holding that lock."""
        wait = LockTarget.check_timeout(timeout)
        check_on_busy(on_busy)
        check_on_unavailable(503)

        def decorate(view: Callable[..., Answer]) -> Callable[..., Answer]:
            plan = LockPlan(
                LockNameTemplate(name, view),
                wait,
                on_busy,
                None,
                self.held,
                make_target=self._target,
                refuse=_refuse,
                attach=_attach_to_request,
                on_unavailable=503,  # ZooKeeper down: 503 at once, never "busy"
                unavailable=_unavailable,
            )
            return locked_call(view, plan, is_async=inspect.iscoroutinefunction(view))

        return decorate

    def _target(self, name: str, identifier: str, timeout: float | None) -> LockTarget:
        # The ProcessClient: connected now, or UnavailableError at once (no connect on import,
        # no wait for a connection timeout during an outage).
        return LockTarget(
            name,
            self.process_client,
            prefix=self.prefix,
            identifier=identifier,
            timeout=timeout,
        )
        # --8<-- [end:decorator]

    def status(self) -> dict[str, Any]:
        """The connection and every recipe under the namespace, as the status pages show them."""
        client = self.process_client.get()
        return {
            "connection": dict(connection_rows(connection_report(client, server=False))),
            "recipes": [
                {"path": row.path, "kind": row.kind, "nodes": [n.role for n in row.nodes]}
                for row in recipe_rows(holders(client, "/"))
            ],
        }


def _refuse(status: int, target: LockTarget, args: Sequence[Any]) -> Answer:
    return status, "busy, try again shortly.\n"


def _unavailable(status: int, error: Exception, args: Sequence[Any]) -> Answer:
    return status, "ZooKeeper is unavailable, try again shortly.\n"


def _attach_to_request(args: Sequence[Any]) -> Callable[[HeldLock], Callable[[], None]] | None:
    request = next((a for a in args if isinstance(a, Request)), None)
    if request is None:
        return None

    def attach(lock: HeldLock) -> Callable[[], None]:
        request.zk_lock = lock

        def detach() -> None:
            request.zk_lock = None

        return detach

    return attach


# -- the app -------------------------------------------------------------------------------


def make_app(
    face: ZkFace, release: threading.Event, served: threading.Event
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    @face.locked("invoice-{number}")
    def send_invoice(request: Request, number: str) -> Answer:
        assert request.zk_lock is not None
        token = request.zk_lock.fencing_token
        served.set()
        release.wait(30)  # the demo says when this send is over: no fixed time
        return 200, f"invoice {number} sent, fencing token {token}\n"

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        parts = environ["PATH_INFO"].strip("/").split("/")
        if parts[:1] == ["invoice"] and len(parts) == 2:
            status, body = send_invoice(Request(environ), number=parts[1])
            content_type = "text/plain; charset=utf-8"
        elif parts == ["zk"]:
            status, body = 200, json.dumps(face.status(), indent=2) + "\n"
            content_type = "application/json"
        else:
            status, body, content_type = 404, "not found\n", "text/plain"
        reason = {200: "OK", 404: "Not Found", 423: "Locked", 503: "Service Unavailable"}
        headers = [("Content-Type", content_type)]
        if status == 503:
            headers.append(("Retry-After", str(RETRY_AFTER)))
        start_response(f"{status} {reason.get(status, '')}", headers)
        return [body.encode()]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingServer(WSGIServer):
    """One thread per request, as every production WSGI server gives."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        threading.Thread(
            target=self._serve_one, args=(request, client_address), daemon=True
        ).start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def main() -> None:
    with ZooKeeperServer() as zk:
        face = ZkFace(ClientSettings(hosts=zk.connect_string, namespace="wsgi-shop"))
        release, served = threading.Event(), threading.Event()
        server = make_server(
            "127.0.0.1", 0, make_app(face, release, served), _ThreadingServer, _QuietHandler
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}"
        try:
            first: list[tuple[int, str]] = []
            sender = threading.Thread(target=lambda: first.append(_get(f"{base}/invoice/7")))
            sender.start()
            assert served.wait(30), "the first request never got its lock"
            others = [_get(f"{base}/invoice/7") for _ in range(2)]
            print(f"while one send holds invoice-7: {[code for code, _ in others]}")
            status = json.loads(_get(f"{base}/zk")[1])
            for recipe in status["recipes"]:
                print(f"status page: {recipe['path']} ({recipe['kind']}): {recipe['nodes']}")
            release.set()
            sender.join(30)
            print(f"the send: {first[0][0]} {first[0][1].strip()}")
            print(f"after it: {_get(f'{base}/zk')[1].count('holder')} holders on the page")
            zk.pause()  # ZooKeeper stops answering: nobody can be seen holding anything
            try:
                code, body = _get(f"{base}/invoice/8")
                print(f"with ZooKeeper paused: {code} {body.strip()}")
            finally:
                zk.resume()
        finally:
            server.shutdown()
            face.process_client.close()
    print("demo finished")


if __name__ == "__main__":
    main()
