"""Fixtures for the Curator interop tests.

- ``curator_build`` (session): compiles ``CuratorPeer.java`` once into a
  session temp dir; skips every test that uses it, naming the packages to
  install, when Java, javac or Debian's Curator jars are missing.
- ``curator_peer_factory``: ``make(connect_string, session_timeout_ms=4000)``
  starts a ``CuratorPeer`` JVM (stderr to a log file in the test's tmp_path);
  every peer it made is closed, and its JVM reaped, after the test.

Every test collected from this directory gets the ``interop`` marker
(``pytest -m "not interop"`` leaves the JVM peers out), registered here so
``--strict-markers`` accepts it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .curator import (
    CuratorBuild,
    CuratorPeer,
    CuratorUnavailable,
    PeerFactory,
    build_curator_peer,
)

_HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "interop: runs Apache Curator 5.4 in a JVM peer against our recipes "
        "(needs Java and Debian's Curator jars; skipped without them)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.interop)


@pytest.fixture(scope="session")
def curator_build(tmp_path_factory: pytest.TempPathFactory) -> CuratorBuild:
    """The compiled peer, built once per test session."""
    try:
        return build_curator_peer(tmp_path_factory.mktemp("curator-peer"))
    except CuratorUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def curator_peer_factory(curator_build: CuratorBuild, tmp_path: Path) -> Iterator[PeerFactory]:
    """``make(connect_string, session_timeout_ms=4000)``: a started Curator peer."""
    peers: list[CuratorPeer] = []

    def make(connect_string: str, session_timeout_ms: int = 4000) -> CuratorPeer:
        log_path = tmp_path / f"curator-peer-{len(peers) + 1}.log"
        peer = CuratorPeer(curator_build, connect_string, session_timeout_ms, log_path=log_path)
        peers.append(peer)
        return peer

    yield make
    for peer in reversed(peers):
        peer.close()
