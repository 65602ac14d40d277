"""Which recursive watchers an event reaches: the same by either of the router's two ways.

With a few watched roots ``PersistentRouter.route`` tests each root as a
prefix of the event's path; with many it looks up each ancestor of the path.
Both must find the same watchers, deepest root first, and never a sibling
that only shares a prefix of its name (``/ab`` is not under ``/a``).
"""

from __future__ import annotations

import random

import pytest

from zk_recipes._client.kazoo.watches import PersistentRouter, ancestors

NAMES = ("a", "b", "ab", "a b", "c")


def _path(rng: random.Random, depth: int) -> str:
    return "/" + "/".join(rng.choice(NAMES) for _ in range(depth)) if depth else "/"


@pytest.mark.parametrize("seed", range(4))
def test_routing_by_roots_or_by_ancestors_finds_the_same_watchers_in_the_same_order(
    seed: int,
) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        router = PersistentRouter()
        roots = {_path(rng, rng.randrange(0, 4)) for _ in range(rng.randrange(1, 12))}
        fires = {root: object() for root in roots}
        for root, fire in fires.items():
            router.add(root, fire, True)  # type: ignore[arg-type]  # any object stands for one
        path = _path(rng, rng.randrange(0, 5))
        expected = [fires[c] for c in ancestors(path) if c in fires]
        assert router.route(1, path) == expected, (sorted(roots), path)
