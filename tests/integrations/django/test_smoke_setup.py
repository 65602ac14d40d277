from __future__ import annotations

from typing import Any

import zk_recipes_django
from zk_recipes import ConnectionState


def test_get_client_connects_to_this_tests_server(zk_settings: dict[str, Any]) -> None:
    client = zk_recipes_django.get_client()
    assert client.state is ConnectionState.CONNECTED
