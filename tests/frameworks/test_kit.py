"""The framework kit's own parts, without a framework: names, bindings, versions."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from zk_recipes import DEFAULT_PREFIX, ConfigurationError, InvalidPathError
from zk_recipes.frameworks import (
    LockNameTemplate,
    bind_arguments,
    leader_path,
    lock_path,
    require_version,
    unknown_parameters,
    version_tuple,
)


def _view(request: object, pk: int, kind: str = "plain", **extra: Any) -> None:
    pass


def test_one_call_binds_the_same_however_it_is_written() -> None:
    signature = inspect.signature(_view)
    written: list[tuple[tuple[object, ...], dict[str, object]]] = [
        ((None, 7), {}),
        ((None,), {"pk": 7}),
        ((None, 7, "plain"), {}),
        ((), {"request": None, "pk": 7, "kind": "plain"}),
    ]
    bound = [bind_arguments(signature, args, kwargs) for args, kwargs in written]
    assert all(b == {"request": None, "pk": 7, "kind": "plain"} for b in bound)
    # names caught by **kwargs appear under their own names, only when passed
    assert bind_arguments(signature, (None, 7), {"page": 2})["page"] == 2
    assert "page" not in bind_arguments(signature, (None, 7), {})
    with pytest.raises(TypeError):
        bind_arguments(signature, (), {})


def test_unknown_parameters_unless_the_function_takes_any() -> None:
    def strict(request: object, pk: int) -> None:
        pass

    assert unknown_parameters(inspect.signature(strict), ["pk", "id", "x"]) == ["id", "x"]
    assert unknown_parameters(inspect.signature(_view), ["anything"]) == []


def test_a_template_and_the_lock_paths_every_face_uses() -> None:
    template = LockNameTemplate("invoice-{pk}-{kind}", _view)
    assert template.render((None, "../7"), {}) == "invoice-..%2F7-plain"
    assert template.render((None, 7), {"kind": ".."}) == "invoice-7-%2E%2E"

    def strict(request: object, pk: int) -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"uses \{id\}, which is not one of"):
        LockNameTemplate("invoice-{id}", strict)
    assert DEFAULT_PREFIX == "/zk-recipes"
    assert lock_path("nightly") == "/zk-recipes/locks/nightly"
    assert leader_path("beat", "/shop/") == "/shop/leaders/beat"
    assert lock_path("/exact/path") == "/exact/path"
    with pytest.raises(ConfigurationError, match="must be non-empty"):
        lock_path("/")
    # A name that makes no path says so about the name, every problem at once.
    with pytest.raises(InvalidPathError, match=r"lock name '\.\./x': its path .* '\.\.'"):
        lock_path("../x")
    with pytest.raises(InvalidPathError, match=r"leader name 'a//b/': .*trailing.*empty segment"):
        leader_path("a//b/")
    with pytest.raises(InvalidPathError, match="reserved by ZooKeeper"):
        lock_path("/zookeeper/quota")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("5.2.1", (5, 2, 1)),
        ("3.0.0rc1", (3, 0, 0)),
        (" 2.3", (2, 3)),
        ((4, 2, 11, "final", 0), (4, 2, 11)),
        ("dev", ()),
    ],
)
def test_versions_are_read_as_their_leading_numbers(
    version: str | tuple[object, ...], expected: tuple[int, ...]
) -> None:
    assert version_tuple(version) == expected


def test_an_old_framework_is_refused_with_both_versions_and_the_fix() -> None:
    require_version("zk_recipes_x", "X", "4.2.0", (4, 2), "x")
    with pytest.raises(ImportError) as refused:
        require_version("zk_recipes_x", "X", (3, 2, 18, "final", 0), (4, 2), "x")
    assert str(refused.value) == (
        "zk_recipes_x needs X >= 4.2, found 3.2.18: pip install 'zk-recipes[x]' (or 'X>=4.2')"
    )
    with pytest.raises(ImportError, match="found 'dev'"):
        require_version("zk_recipes_x", "X", "dev", (4, 2), "x")
