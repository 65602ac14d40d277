"""Recipes on a secured ZooKeeper (issue 6, part 4); docs/security.md says how to run them.

- digest authentication with an ACL the application chooses (the shared server);
- SASL DIGEST-MD5 (a server of this module's own with a JAAS file; needs pure-sasl);
- TLS to the secure client port (Netty server, PEM key and trust stores made with
  the ``openssl`` CLI, mutual authentication).
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import logging
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    CREATOR_ALL_ACL,
    Acl,
    ConfigurationError,
    ConnectTimeoutError,
    Lock,
    NoAuthError,
    NoNodeError,
    Perms,
    TlsOptions,
    ZkClient,
)
from zk_recipes.testing import DEFAULT_JVM_OPTIONS, ZooKeeperServer, find_installation
from zk_recipes.testing.pytest_plugin import ClientFactory

APP_AUTH = [("digest", "app:secret")]


def _ephemerals(client: ZkClient, path: str) -> list[str]:
    found: list[str] = []
    try:
        names = client.get_children(path)
    except NoNodeError:  # a CONTAINER the server reaped while we walked: nothing in it
        return found
    for name in names:
        child = f"{path.rstrip('/')}/{name}"
        stat = client.exists(child)
        if stat is not None and stat.ephemeral_owner:
            found.append(child)
        found.extend(_ephemerals(client, child))
    return found


# ---------------------------------------------------------------- digest + ACL


PAGES = Path(__file__).resolve().parents[2] / "example_projects" / "recipes" / "pages"


def _security_page(monkeypatch: pytest.MonkeyPatch) -> Any:
    """docs/security.md's examples (example_projects/recipes/pages/security_page.py)."""
    monkeypatch.syspath_prepend(str(PAGES))
    return importlib.import_module("security_page")


def test_stranger_cannot_delete_or_overwrite_a_held_lock_node(
    zk_client_factory: ClientFactory,
) -> None:
    owner = zk_client_factory(auth=APP_AUTH, default_acl=CREATOR_ALL_ACL)
    stranger = zk_client_factory()
    lock = Lock(owner, "/locks/job")
    assert lock.acquire(timeout=5)
    node = lock.node
    assert node is not None
    with pytest.raises(NoAuthError) as deleted:
        stranger.delete(node)
    assert deleted.value.path is not None
    with pytest.raises(NoAuthError):
        stranger.set(node, b"mine now")
    with pytest.raises(NoAuthError):
        stranger.delete("/locks/job", recursive=True)
    assert lock.is_held()
    lock.release()


def test_lock_on_a_directory_it_may_not_write_fails_clearly(
    zk_client_factory: ClientFactory,
) -> None:
    owner = zk_client_factory(auth=APP_AUTH, default_acl=CREATOR_ALL_ACL)
    owner.create("/locks/job", parents=True)
    stranger = zk_client_factory()
    started = time.monotonic()
    with pytest.raises(NoAuthError, match=r"/locks/job") as info:
        Lock(stranger, "/locks/job").acquire(timeout=10)
    assert time.monotonic() - started < 3, "NoAuth must not be retried until the timeout"
    assert info.value.path is not None
    assert "/locks/job" in info.value.path
    assert _ephemerals(owner, "/") == []  # nothing left behind by the failed attempt

    friend = zk_client_factory(auth=APP_AUTH, default_acl=CREATOR_ALL_ACL)
    held = Lock(owner, "/locks/job")
    assert held.acquire(timeout=5)
    waiting = Lock(friend, "/locks/job")
    assert not waiting.acquire(timeout=0.3)
    held.release()
    assert waiting.acquire(timeout=5)
    waiting.release()
    assert _ephemerals(owner, "/") == []


# ---------------------------------------------------------------- SASL DIGEST-MD5

JAAS = """Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_app="secret";
};
"""
SASL_APP = {"mechanism": "DIGEST-MD5", "username": "app", "password": "secret"}


@pytest.fixture(scope="module")
def sasl_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    pytest.importorskip("puresasl", reason="SASL needs pure-sasl (pip install pure-sasl)")
    if request.config.getoption("--zk-hosts"):
        pytest.skip("needs a harness-managed server")
    jaas = tmp_path_factory.mktemp("sasl") / "jaas.conf"
    jaas.write_text(JAAS)
    with ZooKeeperServer(
        extra_config={
            "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        },
        jvm_options=(*DEFAULT_JVM_OPTIONS, f"-Djava.security.auth.login.config={jaas}"),
    ) as server:
        yield server


def test_sasl_digest_md5_client_uses_a_lock_others_cannot_touch(
    sasl_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    only_app = [Acl(Perms.ALL, "sasl", "app")]
    app = zk_client_factory(hosts=sasl_server.connect_string, sasl=SASL_APP, default_acl=only_app)
    lock = Lock(app, "/locks/job")
    assert lock.acquire(timeout=5)
    node = lock.node
    assert node is not None
    stranger = zk_client_factory(hosts=sasl_server.connect_string)
    with pytest.raises(NoAuthError):
        stranger.delete(node)
    with pytest.raises(NoAuthError):
        stranger.set(node, b"mine now")
    started = time.monotonic()
    with pytest.raises(NoAuthError, match=r"/locks/job"):
        Lock(stranger, "/locks/job").acquire(timeout=10)
    assert time.monotonic() - started < 3
    assert lock.is_held()
    lock.release()
    twin = zk_client_factory(hosts=sasl_server.connect_string, sasl=SASL_APP)
    with Lock(twin, "/locks/job").acquired(timeout=5):
        pass
    assert _ephemerals(app, "/") == []
    # SASL keeps kazoo's queue (auth packets are ordered there): no caller writes.
    assert app._conn is not None
    assert app._conn.direct_sends == (0, 0)


def test_the_sasl_example_of_the_page_runs(
    sasl_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _security_page(monkeypatch).sasl(sasl_server.connect_string)
    with ZkClient(sasl_server.connect_string, sasl=SASL_APP) as app:
        assert _ephemerals(app, "/") == []


def test_sasl_with_a_wrong_password_fails_at_start_with_a_clear_error(
    sasl_server: ZooKeeperServer,
) -> None:
    wrong = {**SASL_APP, "password": "not-the-secret"}
    client = ZkClient(sasl_server.connect_string, sasl=wrong, connection_timeout=5.0)
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match=r"did not accept the client's SASL DIGEST-MD5"):
        client.start()
    assert time.monotonic() - started < 6
    client.close()


# ---------------------------------------------------------------- TLS

#: Netty jars Debian's zookeeper.jar manifest does not list, needed by the Netty server.
NETTY_EXTRA = ("netty-codec", "netty-resolver", "netty-transport-native-unix-common")


@dataclasses.dataclass(frozen=True)
class TlsSetup:
    server: ZooKeeperServer
    secure_hosts: str
    directory: Path

    def options(self, ca: str = "ca.pem", *, client_cert: bool = True) -> TlsOptions:
        d = self.directory
        return TlsOptions(
            ca_file=str(d / ca),
            cert_file=str(d / "client.pem") if client_cert else None,
            key_file=str(d / "client.key") if client_cert else None,
            check_hostname=True,
        )


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(
        ["openssl", *args],
        cwd=directory,
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )


def _make_certificates(directory: Path) -> None:
    """A CA, a server and a client certificate (SAN IP:127.0.0.1), and a foreign CA."""
    for ca in ("ca", "other-ca"):
        _openssl(
            directory,
            *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-subj", f"/CN=zk-recipes {ca}"),
        )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl(
            directory,
            *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key"),
            *("-out", f"{name}.csr", "-subj", f"/CN=zk-recipes {name}"),
        )
        _openssl(
            directory,
            *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key"),
            *("-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", f"{name}.pem"),
        )
    # ZooKeeper's PEM key store: the private key (PKCS#8) followed by the certificate.
    key_store = (directory / "server.key").read_text() + (directory / "server.pem").read_text()
    (directory / "server-keystore.pem").write_text(key_store)


@pytest.fixture(scope="module")
def tls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsSetup]:
    if request.config.getoption("--zk-hosts"):
        pytest.skip("needs a harness-managed server")
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make test certificates")
    install = find_installation()
    if install.source == "debian":
        extra = [Path(f"/usr/share/java/{name}.jar") for name in NETTY_EXTRA]
        missing = [str(jar) for jar in extra if not jar.exists()]
        if missing:
            pytest.skip(
                f"the Netty server needs {', '.join(missing)} (apt-get install libnetty-java)"
            )
        install = dataclasses.replace(install, classpath=(*install.classpath, *extra))
    directory = tmp_path_factory.mktemp("tls")
    _make_certificates(directory)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        secure_port = sock.getsockname()[1]
    config = {
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": "127.0.0.1",
        # Unknown zoo.cfg keys become zookeeper.* system properties (zookeeper.ssl.*).
        "ssl.keyStore.location": str(directory / "server-keystore.pem"),
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(directory / "ca.pem"),
        "ssl.trustStore.type": "PEM",
        "ssl.clientAuth": "need",
    }
    with ZooKeeperServer(extra_config=config, installation=install) as server:
        yield TlsSetup(server, f"127.0.0.1:{secure_port}", directory)


def test_a_lock_works_over_tls(tls: TlsSetup, zk_client_factory: ClientFactory) -> None:
    first = zk_client_factory(hosts=tls.secure_hosts, tls=tls.options())
    second = zk_client_factory(hosts=tls.secure_hosts, tls=tls.options())
    lock = Lock(first, "/locks/job")
    assert lock.acquire(timeout=5)
    other = Lock(second, "/locks/job")
    assert not other.acquire(timeout=0.3)
    lock.release()
    assert other.acquire(timeout=5)
    other.release()
    # TLS keeps kazoo's own send path (it knows renegotiation): no caller writes.
    for client in (first, second):
        assert client._conn is not None
        assert client._conn.direct_sends == (0, 0)


def test_the_tls_example_of_the_page_runs(tls: TlsSetup, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tls.directory
    page = _security_page(monkeypatch)
    page.tls(tls.secure_hosts, str(d / "ca.pem"), str(d / "client.pem"), str(d / "client.key"))
    with ZkClient(tls.secure_hosts, tls=tls.options()) as client:
        assert _ephemerals(client, "/") == []


# kazoo 2.11 does not close the TLS socket when the handshake fails
# (handlers/utils.py create_tcp_connection re-raises ssl.SSLError without conn.close()),
# so a ResourceWarning fires when it is collected: collect it here and ignore only that.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <ssl.SSLSocket:pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.parametrize(
    "case", ["plain-client", "foreign-ca", "no-client-certificate", "tls-to-plain-port"]
)
def test_mismatched_tls_fails_in_about_the_connect_timeout(
    tls: TlsSetup, zk_client_factory: ClientFactory, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    # kazoo logs each failed handshake with the SSLError as an argument; a captured
    # record would keep the leaked socket alive past this test (and its filter).
    caplog.set_level(logging.ERROR, logger="kazoo")
    hosts = tls.server.connect_string if case == "tls-to-plain-port" else tls.secure_hosts
    options = {
        "plain-client": None,
        "foreign-ca": tls.options("other-ca.pem"),
        "no-client-certificate": tls.options(client_cert=False),
        "tls-to-plain-port": tls.options(),
    }[case]
    client = zk_client_factory(hosts=hosts, tls=options, start=False)
    started = time.monotonic()
    with pytest.raises(
        ConnectTimeoutError, match=r"within 1\.5 s \(last problem: .+\).*TLS/auth settings match"
    ) as info:
        client.start(timeout=1.5)
    if case == "foreign-ca":
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert 1.4 < time.monotonic() - started < 4
    client.close()
    # The failed connection is stopped on a thread of its own (start() keeps its timeout);
    # its last handshake may leak one more socket until that thread ends.
    for thread in threading.enumerate():
        if thread.name == "zk-recipes stop":
            thread.join(10)
    gc.collect()
