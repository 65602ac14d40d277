"""Plain nodes a face keeps, in ``holders()``: a ``RecipeLayout`` with base "node".

Celery's queued markers use it (tests/integrations/celery/test_layouts.py);
here a made-up face, so that the core's part is tested without one.
"""

from __future__ import annotations

import json

import pytest

from zk_recipes import CreateMode, Owner, RecipeLayout, holders, register_layout
from zk_recipes._inspect import layouts
from zk_recipes.testing.pytest_plugin import ClientFactory


@pytest.fixture
def fresh_layouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout registry as if nothing had registered yet; put back after the test."""
    monkeypatch.setattr(layouts, "_registered", [])
    monkeypatch.setattr(layouts, "_loaded", False)


def _flagged(data: str) -> Owner | None:
    return Owner(id=f"flagged: {data}") if data.startswith("bad") else None


def test_marker_nodes_are_reported_each_as_its_one_holder(
    zk_client_factory: ClientFactory, fresh_layouts: None
) -> None:
    register_layout(RecipeLayout("job ticket", base="node", path="tickets/*"))
    register_layout(RecipeLayout("bad row", base="node", path="rows/*", owner_of_data=_flagged))
    client = zk_client_factory()
    owner = {"host": "web1", "pid": 7, "id": "job-42", "since": 12.5}
    client.create("/app/tickets/t1", json.dumps(owner).encode(), parents=True)
    client.create("/app/tickets/t2", b"plain text", mode=CreateMode.EPHEMERAL)
    client.create("/app/rows/r1", b"good", parents=True)
    client.create("/app/rows/r2", b"bad: no id")
    client.create("/app/other/x", b"{}", parents=True)  # no layout names it

    report = {r.path: r for r in holders(client, "/app")}
    assert [(path, r.kind) for path, r in report.items()] == [
        ("/app/rows/r2", "bad row"),
        ("/app/tickets/t1", "job ticket"),
        ("/app/tickets/t2", "job ticket"),
    ]
    [ticket] = report["/app/tickets/t1"].holders
    assert (ticket.owner.host, ticket.identifier, ticket.since) == ("web1", "job-42", 12.5)
    assert (ticket.session_id, ticket.data) == (0, None)
    [plain] = report["/app/tickets/t2"].holders
    assert (plain.session_id, plain.data, plain.identifier) == (
        client.session_id,
        "plain text",
        None,
    )
    [flagged] = report["/app/rows/r2"].holders
    assert flagged.identifier == "flagged: bad: no id"
    assert report["/app/rows/r2"].waiting == ()
