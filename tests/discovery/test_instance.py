"""Instance JSON is Curator's byte for byte, UriSpec builds as Curator's, bad payloads are refused.

The expected bytes are those Curator 5.4's JsonInstanceSerializer wrote for
the same instances (CURATOR_COMPAT 2.13); the interop tests compare with a
live Java serializer too.
"""

from __future__ import annotations

import pytest

from zk_recipes import (
    ConfigurationError,
    JavaValue,
    ServiceInstance,
    ServiceType,
    UnreadableInstanceError,
    UriSpec,
    spring_cloud_payload,
)
from zk_recipes.discovery._json import dumps
from zk_recipes.discovery._payload import check_payload

CURATOR_STRING_PAYLOAD = (
    b'{"name":"svc","id":"inst-1","address":"10.0.0.1","port":8080,"sslPort":null,'
    b'"payload":"hello-payload","registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC",'
    b'"uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://foo.com:",'
    b'"variable":false},{"value":"port","variable":true}]}}'
)
CURATOR_MAP_PAYLOAD = (
    b'{"name":"svc2","id":"inst-2","address":"10.0.0.2","port":null,"sslPort":8443,'
    b'"payload":{"@class":"java.util.HashMap","k":"v"},"registrationTimeUTC":1700000000001,'
    b'"serviceType":"STATIC","uriSpec":null}'
)


def test_the_bytes_are_curators_for_a_string_and_a_map_payload() -> None:
    first = ServiceInstance(
        name="svc",
        id="inst-1",
        address="10.0.0.1",
        port=8080,
        payload="hello-payload",
        registration_time_utc=1700000000000,
        uri_spec=UriSpec("{scheme}://foo.com:{port}"),
    )
    second = ServiceInstance(
        name="svc2",
        id="inst-2",
        address="10.0.0.2",
        ssl_port=8443,
        payload={"@class": "java.util.HashMap", "k": "v"},
        registration_time_utc=1700000000001,
        service_type=ServiceType.STATIC,
    )
    assert first.to_json() == CURATOR_STRING_PAYLOAD
    assert second.to_json() == CURATOR_MAP_PAYLOAD
    assert ServiceInstance.from_json(CURATOR_STRING_PAYLOAD) == first
    assert ServiceInstance.from_json(CURATOR_MAP_PAYLOAD) == second


def test_enabled_is_written_only_when_false_and_read_as_true_when_missing() -> None:
    instance = ServiceInstance(name="s", id="i", address=None, registration_time_utc=1)
    assert b"enabled" not in instance.to_json()
    disabled = instance.replace(enabled=False)
    assert disabled.to_json().endswith(b',"uriSpec":null,"enabled":false}')
    assert ServiceInstance.from_json(disabled.to_json()).enabled is False
    assert ServiceInstance.from_json(instance.to_json()).enabled is True


def test_strings_and_numbers_are_written_as_jackson_writes_them() -> None:
    # Non-ASCII raw, control characters as upper-case \u00XX, the short escapes, "/" as is.
    assert dumps('é/\x01\x1f\n\t"\\') == '"é/\\u0001\\u001F\\n\\t\\"\\\\"'
    # Java's Double.toString: plain from 10^-3 to 10^7, else with an exponent.
    assert [dumps(x) for x in (1.0, 0.001, 1234567.0, 1e7, 1e10, 1.5e-4, -2.5e8)] == [
        "1.0", "0.001", "1234567.0", "1.0E7", "1.0E10", "1.5E-4", "-2.5E8"
    ]  # fmt: skip
    assert dumps({"b": [1, True, None], "a": {}}) == '{"b":[1,true,null],"a":{}}'


def test_uri_spec_parses_and_builds_as_curators() -> None:
    instance = ServiceInstance(
        name="svc",
        id="i1",
        address="10.1.1.1",
        port=80,
        ssl_port=None,
        registration_time_utc=5,
        service_type=ServiceType.PERMANENT,
    )
    spec = UriSpec("{scheme}://{address}:{port}/{ name }/{unknown}{}{[}x{]}-{service-type}")
    assert spec.build(instance) == "http://10.1.1.1:80/svc/{x}-permanent"
    assert (
        spec.build(instance, {"scheme": "ftp", "unknown": 7})
        == "ftp://10.1.1.1:80/svc/7{x}-permanent"
    )
    assert (
        UriSpec("{scheme}://h:{ssl-port}").build(instance.replace(ssl_port=443)) == "https://h:443"
    )
    assert UriSpec("{port}").build(instance.replace(port=None)) == ""
    assert str(UriSpec("{scheme}://a")) == "{scheme}://a"
    for bad in ("{a{b}}", "a}", "{open"):
        with pytest.raises(ConfigurationError):
            UriSpec(bad)


@pytest.mark.parametrize(
    ("payload", "payload_class", "says"),
    [
        ({"k": "v"}, None, 'it has no "@class"'),
        ({"k": "v", "@class": "java.util.HashMap"}, None, '"@class" must come first'),
        ({"@class": "not a class!"}, None, "must be a Java class name"),
        ([1, 2], None, "a list goes inside such a dict"),
        (float("nan"), None, "JSON has no such number"),
        ({"@class": "java.util.HashMap", "x": {1: 2}}, None, "JSON keys are strings"),
        ("text", "com.example.Details", "give a dict"),
        ({"@class": "java.util.HashMap"}, "com.example.Details", "cannot cast"),
    ],
)
def test_a_payload_a_java_reader_could_not_read_is_refused_and_says_why(
    payload: object, payload_class: str | None, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        check_payload(payload, payload_class)


def test_payloads_a_java_reader_reads() -> None:
    for payload, payload_class in [
        (None, None),
        ("s", "java.lang.String"),
        (3, None),
        (True, None),
        (2.5, "java.lang.Double"),
        ({"@class": "java.util.HashMap", "list": [1, {"a": None}]}, "java.util.Map"),
        (spring_cloud_payload("orders", metadata={"zone": "a"}), None),
    ]:
        check_payload(payload, payload_class)
    spring = spring_cloud_payload("orders", id="orders-1", metadata={"zone": "a"})
    assert list(spring) == ["@class", "id", "name", "metadata"]
    assert spring["@class"] == "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"


def test_bad_fields_and_unreadable_nodes_say_what_is_wrong() -> None:
    with pytest.raises(ConfigurationError, match="znode name"):
        ServiceInstance(name="a/b")
    with pytest.raises(ConfigurationError, match="port number"):
        ServiceInstance(name="a", port=70000)
    with pytest.raises(ConfigurationError, match="service_type must be one of"):
        ServiceInstance(name="a", service_type="EPHEMERAL")  # type: ignore[arg-type]
    for data in (b"not json", b"[1]", b'{"name":"a"}', b'{"name":"a","id":"b","port":"80"}'):
        with pytest.raises(UnreadableInstanceError):
            ServiceInstance.from_json(data)
    # Unknown keys are ignored, as Curator's reader is told to.
    read = ServiceInstance.from_json(b'{"name":"a","id":"b","extra":1,"registrationTimeUTC":3}')
    assert (read.name, read.id, read.registration_time_utc, read.address) == ("a", "b", 3, None)


def test_longs_and_other_typed_values_are_written_as_jackson_types_them() -> None:
    def payload_of(value: object) -> bytes:
        data = ServiceInstance(name="s", id="i", address=None, payload=value).to_json()
        return data[data.index(b'"payload":') + 10 : data.index(b',"registrationTimeUTC"')]

    assert payload_of(2**31 - 1) == b"2147483647"  # an Integer: bare
    assert payload_of(2**31) == b'["java.lang.Long",2147483648]'
    assert payload_of(2**64) == b'["java.math.BigInteger",18446744073709551616]'
    assert payload_of(JavaValue("java.lang.Long", 5)) == b'["java.lang.Long",5]'
    assert payload_of("😀") == b'"\\uD83D\\uDE00"'  # beyond U+FFFF: a surrogate pair
    for value in (2**31, 2**64, JavaValue("java.lang.Long", 5), JavaValue("java.lang.Float", 1.5)):
        instance = ServiceInstance(name="s", id="i", address=None, payload=value)
        assert ServiceInstance.from_json(instance.to_json()) == instance
