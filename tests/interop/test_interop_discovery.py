"""Our ServiceDiscovery next to Curator 5.4's curator-x-discovery, on one base path.

Instances registered on either side are found on the other with the same field
values, and the node bytes are exactly what Curator's ``JsonInstanceSerializer``
writes: the peer's ``reserialize`` (Curator reads the bytes and writes them
again) gives back the very same bytes, and our ``to_json()`` of an instance
Java registered equals Java's node. Curator's ``ServiceCache`` and
``ServiceProvider`` pick up our instances and drop them when we unregister.
Curator peers take absolute paths: ours live under the test's namespace, so the
peer gets ``zk_namespace + BASE``. Instances cross the peer protocol as hex.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from zk_recipes import (
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
    UriSpec,
    ZkClient,
    aio,
    spring_cloud_payload,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorBuild, CuratorPeer, CuratorPeerError, PeerFactory

T = TypeVar("T")

BASE = "/services"
#: Curator's parts for UriSpec("{scheme}://foo.com:{port}"), written out by hand.
FOO_PARTS = [
    {"value": "scheme", "variable": True},
    {"value": "://foo.com:", "variable": False},
    {"value": "port", "variable": True},
]


# -- helpers ----------------------------------------------------------------------------------


def wire(instance: ServiceInstance) -> dict[str, Any]:
    """What Curator's compatible-mode JSON holds for ``instance``, field by field."""
    spec = instance.uri_spec
    return {
        "name": instance.name,
        "id": instance.id,
        "address": instance.address,
        "port": instance.port,
        "sslPort": instance.ssl_port,
        "payload": instance.payload,
        "registrationTimeUTC": instance.registration_time_utc,
        "serviceType": instance.service_type.value,
        "uriSpec": None
        if spec is None
        else {"parts": [{"value": p.value, "variable": p.variable} for p in spec.parts]},
    }


def curator_json(
    name: str,
    id: str,
    *,
    address: str | None = None,
    port: int | None = None,
    ssl_port: int | None = None,
    payload: Any = None,
    registration_time_utc: int = 1700000000000,
    service_type: str = "DYNAMIC",
    uri_parts: list[dict[str, Any]] | None = None,
) -> bytes:
    """An instance as a Java service hands it to the peer (the peer's serializer reads it)."""
    body = {
        "name": name,
        "id": id,
        "address": address,
        "port": port,
        "sslPort": ssl_port,
        "payload": payload,
        "registrationTimeUTC": registration_time_utc,
        "serviceType": service_type,
        "uriSpec": None if uri_parts is None else {"parts": uri_parts},
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def java_query(peer: CuratorPeer, handle: str, service: str) -> list[bytes]:
    """Curator's queryForInstances, each instance as its serializer writes it, in id order."""
    return [bytes.fromhex(blob) for blob in peer.call(f"query {handle} {service}").split()]


def java_instance(peer: CuratorPeer, handle: str, service: str, id: str) -> bytes | None:
    reply = peer.call(f"instance {handle} {service} {id}")
    return None if reply == "-" else bytes.fromhex(reply)


def reserialize(peer: CuratorPeer, data: bytes) -> bytes:
    """Curator's JsonInstanceSerializer reads ``data`` and writes the instance again."""
    return bytes.fromhex(peer.call(f"reserialize {data.hex()}"))


def node(client: ZkClient, service: str, id: str) -> bytes:
    return client.get(f"{BASE}/{service}/{id}")[0]


@contextlib.contextmanager
def java_discovery(peer: CuratorPeer, handle: str, base_path: str) -> Iterator[str]:
    """A Curator ServiceDiscovery on ``base_path``; closed (with its caches, providers and
    registrations) on the way out."""
    peer.call(f"discovery {handle} {base_path}")
    try:
        yield handle
    finally:
        with contextlib.suppress(CuratorPeerError):
            peer.call(f"close {handle}")


def settles(read: Callable[[], T], want: T, what: str, timeout: float = 20.0) -> None:
    """Poll ``read`` until it returns ``want`` (each side is told on its own thread)."""
    deadline = time.monotonic() + timeout
    while (got := read()) != want:
        assert time.monotonic() < deadline, f"{what}: {got!r} never became {want!r}"
        time.sleep(0.05)


def picks(peer: CuratorPeer, handle: str, count: int) -> list[str]:
    return [peer.call(f"pick {handle}") for _ in range(count)]


@pytest.fixture(scope="module")
def serializer_peer(
    curator_build: CuratorBuild, zk_hosts: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CuratorPeer]:
    """One peer for the serializer-only checks (``reserialize`` touches no znode)."""
    log_path = tmp_path_factory.mktemp("discovery-serializer") / "curator-peer.log"
    with CuratorPeer(curator_build, zk_hosts, log_path=log_path) as peer:
        yield peer


# -- Python registers, Java reads -------------------------------------------------------------


def test_java_reads_our_instances_and_writes_the_same_bytes(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    unicode_name = "grüße-服务"
    ours = [
        ServiceInstance(
            name="svc",
            id="inst-1",
            address="10.0.0.1",
            port=8080,
            ssl_port=None,
            payload="hello",
            registration_time_utc=1700000000000,
            service_type=ServiceType.DYNAMIC,
            uri_spec=UriSpec("{scheme}://foo.com:{port}"),
        ),
        ServiceInstance(
            name="svc",
            id="inst-2",
            address="10.0.0.2",
            port=None,
            ssl_port=8443,
            payload={"@class": "java.util.HashMap", "k": "v"},
            registration_time_utc=1700000000001,
        ),
        ServiceInstance(
            name="svc",
            id="inst-3",
            address=None,
            port=7000,
            payload=None,
            registration_time_utc=1700000000002,
            service_type=ServiceType.STATIC,
        ),
        ServiceInstance(
            name="spring-svc",
            id="inst-4",
            address="10.0.0.4",
            port=8761,
            payload=spring_cloud_payload(
                id="spring-app-1",
                name="spring-svc",
                metadata={"zone": "eu-west", "instance_status": "UP"},
            ),
            registration_time_utc=1700000000003,
            uri_spec=UriSpec("{scheme}://{address}:{port}"),
        ),
        ServiceInstance(
            name=unicode_name,
            id="inst-5",
            address="10.0.0.5",
            port=1,
            payload='say "hi", \\ é ☕ 😀\ttab',
            registration_time_utc=1700000000004,
        ),
    ]
    peer = curator_peer_factory(zk_hosts)
    with (
        ServiceDiscovery(client, base_path=BASE) as discovery,
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
    ):
        for instance in ours:
            discovery.register(instance)
        problems: list[str] = []
        for service in ("svc", "spring-svc", unicode_name):
            expected = sorted((i for i in ours if i.name == service), key=lambda i: i.id)
            seen = java_query(peer, d, service)
            java_fields = [json.loads(blob) for blob in seen]
            if java_fields != [wire(i) for i in expected]:
                problems.append(f"{service}: Java read {java_fields}, we wrote {expected}")
            for instance, java_bytes in zip(expected, seen, strict=False):
                data = node(client, instance.name, instance.id)
                if data != instance.to_json():
                    problems.append(f"{instance.id}: node {data!r} != to_json()")
                if java_bytes != data:
                    problems.append(f"{instance.id}: Curator writes {java_bytes!r}, node {data!r}")
                if reserialize(peer, data) != data:
                    problems.append(f"{instance.id}: reserialize changed {data!r}")
        assert not problems, "\n".join(problems)
        assert json.loads(java_query(peer, d, "svc")[0])["uriSpec"]["parts"] == FOO_PARTS
        assert peer.call(f"names {d}").split() == sorted(["svc", "spring-svc", unicode_name])
        assert java_instance(peer, d, "svc", "inst-2") == node(client, "svc", "inst-2")
        assert java_instance(peer, d, "svc", "nope") is None


@pytest.mark.parametrize(
    "payload",
    [
        None,
        True,
        False,
        0,
        -7,
        2**31 - 1,
        2**31,  # Curator holds a Long, and types it: ["java.lang.Long", 2147483648]
        -(2**40),
        1.5,
        -0.25,
        0.001,
        1e-4,
        1e7,
        123456789.0,
        1e21,
        -0.0,
        "",
        'control \x01 \x1f tab\t nl\n cr\r bs\b ff\f quote" backslash\\ slash/ del\x7f',
        "bmp é ☕ \u2028 and beyond 😀",
        {
            "@class": "java.util.LinkedHashMap",
            "z": 1,
            "a": [1, "x", None, True, 2.5],
            "m": {"k": "v"},
        },
        {"@class": "java.util.HashMap", "k": "v"},
    ],
    ids=repr,
)
def test_payload_bytes_are_curators(payload: Any, serializer_peer: CuratorPeer) -> None:
    """Our ``to_json`` is what Curator writes for the same instance, and we read Curator's."""
    peer = serializer_peer
    instance = ServiceInstance(
        name="svc",
        id="inst",
        address="10.0.0.1",
        port=80,
        payload=payload,
        registration_time_utc=1700000000000,
    )
    ours = instance.to_json()
    curators = reserialize(peer, ours)
    assert curators == ours
    assert ServiceInstance.from_json(curators) == instance


# -- Java registers, Python reads -------------------------------------------------------------


def test_we_read_java_instances_and_write_the_same_bytes(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    api_parts = [
        {"value": "scheme", "variable": True},
        {"value": "://", "variable": False},
        {"value": "address", "variable": True},
        {"value": ":", "variable": False},
        {"value": "port", "variable": True},
        {"value": "/api", "variable": False},
    ]
    java_side = [
        curator_json(
            "jsvc",
            "java-1",
            address="192.168.1.5",
            port=9000,
            payload="from java",
            registration_time_utc=1700000000123,
            uri_parts=api_parts,
        ),
        curator_json(
            "jsvc",
            "java-2",
            ssl_port=443,
            payload={"@class": "java.util.HashMap", "k": "v"},
            registration_time_utc=1700000000124,
        ),
        curator_json(
            "jsvc",
            "java-3",
            address="192.168.1.7",
            port=9002,
            payload=42,
            registration_time_utc=1700000000125,
            service_type="STATIC",
            uri_parts=FOO_PARTS,
        ),
    ]
    expected = [
        ServiceInstance(
            name="jsvc",
            id="java-1",
            address="192.168.1.5",
            port=9000,
            payload="from java",
            registration_time_utc=1700000000123,
            uri_spec=UriSpec("{scheme}://{address}:{port}/api"),
        ),
        ServiceInstance(
            name="jsvc",
            id="java-2",
            address=None,
            ssl_port=443,
            payload={"@class": "java.util.HashMap", "k": "v"},
            registration_time_utc=1700000000124,
        ),
        ServiceInstance(
            name="jsvc",
            id="java-3",
            address="192.168.1.7",
            port=9002,
            payload=42,
            registration_time_utc=1700000000125,
            service_type=ServiceType.STATIC,
            uri_spec=UriSpec("{scheme}://foo.com:{port}"),
        ),
    ]
    peer = curator_peer_factory(zk_hosts)
    with (
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
        ServiceDiscovery(client, base_path=BASE) as discovery,
    ):
        for data in java_side:
            peer.call(f"register {d} {data.hex()}")
        found = discovery.query_for_instances("jsvc")
        assert found == expected
        java_nodes = java_query(peer, d, "jsvc")
        assert [node(client, "jsvc", i.id) for i in expected] == java_nodes
        assert [i.to_json() for i in found] == java_nodes
        assert discovery.query_for_instance("jsvc", "java-2") == expected[1]
        assert discovery.query_for_instance("jsvc", "nope") is None


@pytest.mark.parametrize("long_value", [5, 2**31])
def test_we_read_java_long_payloads(
    long_value: int,
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """Jackson types a payload that is not a String, Integer, Double or Boolean: a Java
    Long (any value) is written ``["java.lang.Long", 5]``. We read it and write it back."""
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with (
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
        ServiceDiscovery(client, base_path=BASE) as discovery,
    ):
        data = curator_json("lsvc", "java-long", port=1, payload=["java.lang.Long", long_value])
        peer.call(f"register {d} {data.hex()}")
        [java_node] = java_query(peer, d, "lsvc")
        assert json.loads(java_node)["payload"] == ["java.lang.Long", long_value]
        found = discovery.query_for_instances("lsvc")
        assert [i.id for i in found] == ["java-long"], "we skipped Java's instance as unreadable"
        assert found[0].to_json() == java_node


# -- updates both ways ------------------------------------------------------------------------


def test_updates_cross_both_ways(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    mine = ServiceInstance(
        name="svc", id="py-1", address="10.0.0.1", port=1, registration_time_utc=1
    )
    peer = curator_peer_factory(zk_hosts)
    with (
        ServiceDiscovery(client, base_path=BASE) as discovery,
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
    ):
        discovery.register(mine)
        peer.call(f"register {d} {curator_json('svc', 'java-1', port=2).hex()}")
        moved = mine.replace(port=1111, payload={"@class": "java.util.HashMap", "v": "2"})
        discovery.update(moved)
        assert java_instance(peer, d, "svc", "py-1") == moved.to_json()
        peer.call(f"update {d} {curator_json('svc', 'java-1', port=2222, payload='x').hex()}")
        theirs = discovery.query_for_instance("svc", "java-1")
        assert theirs is not None
        assert (theirs.port, theirs.payload) == (2222, "x")
        assert theirs.to_json() == node(client, "svc", "java-1")


# -- Curator's ServiceCache and ServiceProvider -----------------------------------------------


def test_java_cache_and_provider_pick_ours_and_drop_what_we_unregister(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    ours = {
        f"py-{n}": ServiceInstance(
            name="pool", id=f"py-{n}", address=f"10.0.0.{n}", port=8000 + n, payload=f"p{n}"
        )
        for n in (1, 2, 3)
    }
    peer = curator_peer_factory(zk_hosts)
    with (
        ServiceDiscovery(client, base_path=BASE) as discovery,
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
    ):
        for instance in ours.values():
            discovery.register(instance)
        peer.call(f"register {d} {curator_json('pool', 'java-1', port=9000).hex()}")
        peer.call(f"servicecache c {d} pool")
        peer.call(f"provider p {d} pool roundrobin")

        def cache_ids() -> list[str]:
            return peer.call("cacheids c").split()

        def round_of(count: int) -> list[str]:
            return sorted(picks(peer, "p", count))

        everyone = ["java-1", "py-1", "py-2", "py-3"]
        settles(cache_ids, everyone, "Java's ServiceCache")
        # round robin: as many consecutive picks as instances give each one once
        settles(lambda: round_of(4), everyone, "Java's round-robin picks")

        discovery.unregister(ours["py-2"])
        left = ["java-1", "py-1", "py-3"]
        settles(cache_ids, left, "Java's ServiceCache after our unregister")
        settles(lambda: round_of(3), left, "Java's picks after our unregister")

        late = ServiceInstance(name="pool", id="py-4", address="10.0.0.4", port=8004)
        discovery.register(late)
        settles(cache_ids, [*left, "py-4"], "Java's ServiceCache after our register")
        peer.call("close c")
        # "p" goes with its discovery


def test_names_list_both_sides_services(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with (
        ServiceDiscovery(client, base_path=BASE) as discovery,
        java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d,
    ):
        discovery.register(ServiceInstance(name="py-only", id="a", address="10.0.0.1", port=1))
        peer.call(f"register {d} {curator_json('java-only', 'b', port=2).hex()}")
        peer.call(f"register {d} {curator_json('shared', 'c', port=3).hex()}")
        discovery.register(ServiceInstance(name="shared", id="d", address="10.0.0.1", port=4))
        both = ["java-only", "py-only", "shared"]
        assert sorted(discovery.query_for_names()) == both
        assert peer.call(f"names {d}").split() == both
        assert [i.id for i in discovery.query_for_instances("shared")] == ["c", "d"]
        assert [json.loads(b)["id"] for b in java_query(peer, d, "shared")] == ["c", "d"]


def test_the_asyncio_discovery_crosses_with_curators_both_ways(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    # aio.ServiceDiscovery is the sync one awaited: Curator reads what it registers,
    # byte for byte, and it reads Curator's registrations.
    client = zk_client_factory()
    mine = ServiceInstance(
        name="svc", id="aio-1", address="10.0.0.1", port=1, registration_time_utc=1
    )
    peer = curator_peer_factory(zk_hosts)

    async def main() -> None:
        async with aio.ServiceDiscovery(client, base_path=BASE) as discovery:
            await discovery.register(mine)
            assert await asyncio.to_thread(java_instance, peer, d, "svc", "aio-1") == (
                mine.to_json()
            )
            await asyncio.to_thread(
                peer.call, f"register {d} {curator_json('svc', 'java-1', port=2).hex()}"
            )
            found = await discovery.query_for_instances("svc")
            assert [i.id for i in found] == ["aio-1", "java-1"]
            assert found[1].to_json() == node(client, "svc", "java-1")
            moved = mine.replace(port=1111)
            await discovery.update(moved)
            assert await asyncio.to_thread(java_instance, peer, d, "svc", "aio-1") == (
                moved.to_json()
            )
        # Leaving the block deleted ours: Curator sees only its own.
        left = await asyncio.to_thread(java_query, peer, d, "svc")
        assert [json.loads(blob)["id"] for blob in left] == ["java-1"]

    with java_discovery(peer, "d", f"{zk_namespace}{BASE}") as d:
        asyncio.run(main())
