"""The kit's Announcement: in the background, per host when asked, withdrawn at once."""

from __future__ import annotations

import pytest

from zk_recipes import ConfigurationError, ServiceDiscovery, ServiceType
from zk_recipes.frameworks import Announcement, ServiceSpec
from zk_recipes.frameworks._announcement import parse_service
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_the_setting_reads_any_key_case_and_json_and_names_what_is_wrong() -> None:
    spec = parse_service({"NAME": "orders", "Port": 80, "service_type": "static"}, False)
    assert spec == ServiceSpec(name="orders", port=80, service_type=ServiceType.STATIC)
    assert parse_service('{"name": "orders"}', True) == ServiceSpec(name="orders")
    assert parse_service(None, False) is None
    for bad, says in [
        ({"NAME": "x", "HOST": "h"}, "no key HOST"),
        ({"PORT": 1}, "needs a NAME"),
        ({"NAME": "x", "SERVICE_TYPE": "ephemeral"}, "SERVICE_TYPE must be one of"),
        ({"NAME": "x", "PORT": 99999}, "port number"),
        ({"NAME": "x", "PAYLOAD": {"k": 1}}, '"@class"'),
        ({"NAME": "x", "URI_SPEC": "{open"}, "not closed"),
        ("not json", "must be JSON"),
        (["NAME"], "must be a dict"),
    ]:
        with pytest.raises(ConfigurationError, match=says):
            parse_service(bad, False)


def test_per_host_one_process_registers_and_a_standby_takes_over_when_it_stops(
    zk_client_factory: ClientFactory,
) -> None:
    spec = ServiceSpec(name="orders", port=80, address="h", per_host=True)
    first_client, second_client = zk_client_factory(), zk_client_factory()
    first = Announcement(spec, lambda: first_client)
    second = Announcement(spec, lambda: second_client)
    first.start()
    assert first.registered.wait(10)
    second.start()
    discovery = ServiceDiscovery(zk_client_factory())
    [only] = discovery.query_for_instances("orders")
    assert only.id.endswith("-80")  # <host>-<port>
    assert not second.registered.wait(1.5)  # stands by
    first.stop()
    assert second.registered.wait(10)  # took over
    owner = second_client.exists(f"/services/orders/{only.id}")
    assert owner is not None
    assert owner.ephemeral_owner == second_client.session_id
    second.stop()
    wait_until(lambda: discovery.query_for_instances("orders") == [], "withdrawn")
    second.stop()  # idempotent
