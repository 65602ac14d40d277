"""The facade, the package boundaries and the integration import guards."""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys

import pytest

import zk_recipes

ROOT = pathlib.Path(__file__).resolve().parent.parent
FRAMEWORKS = ("django", "celery", "flask", "kombu", "werkzeug")


def test_all_lists_every_public_name_and_only_those() -> None:
    public = {
        name
        for name, value in vars(zk_recipes).items()
        if not name.startswith("_")
        and not isinstance(value, type(sys))
        and name != "annotations"  # from __future__
    }
    assert set(zk_recipes.__all__) - {"__version__"} == public
    for name in zk_recipes.__all__:
        assert getattr(zk_recipes, name) is not None


def test_every_error_is_rooted_at_zk_recipes_error() -> None:
    errors = [
        getattr(zk_recipes, n)
        for n in zk_recipes.__all__
        if isinstance(getattr(zk_recipes, n), type)
        and issubclass(getattr(zk_recipes, n), Exception)
    ]
    assert len(errors) >= 18
    assert all(issubclass(e, zk_recipes.ZkRecipesError) for e in errors)
    # "you closed it" and "the world broke it" stay apart.
    assert not issubclass(zk_recipes.SessionLost, zk_recipes.ClientStateError)
    # "try again" (transient) and "it is gone" (terminal) are siblings: code that
    # retries on ConnectionLostError never retries past a lost lock.
    assert not issubclass(zk_recipes.SessionLost, zk_recipes.ConnectionLostError)
    assert not issubclass(zk_recipes.LockLost, zk_recipes.ConnectionLostError)
    assert not issubclass(zk_recipes.ConnectionLostError, zk_recipes.SessionLost)
    assert not zk_recipes.is_retryable(zk_recipes.LockLost("x"))
    # Every bad argument is a ConfigurationError, a ValueError (and a TypeError when
    # it is of the wrong type).
    for bad_argument in (
        zk_recipes.InvalidPathError,
        zk_recipes.DataTooLargeError,
        zk_recipes.WrongTypeError,
    ):
        assert issubclass(bad_argument, zk_recipes.ConfigurationError)
    assert issubclass(zk_recipes.ConfigurationError, ValueError)
    assert issubclass(zk_recipes.WrongTypeError, TypeError)


def test_public_names_report_the_facade_as_their_module() -> None:
    for name in zk_recipes.__all__:
        value = getattr(zk_recipes, name)
        if isinstance(value, type) or callable(value):
            assert value.__module__ == "zk_recipes", name
    assert repr(zk_recipes.ConnectionState.LOST).startswith("<ConnectionState.LOST")
    assert zk_recipes.ZkClient.start.__module__ == "zk_recipes"


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_imports_no_framework() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & set(FRAMEWORKS))
        for path in (ROOT / "zk_recipes").rglob("*.py")
        if _imports(path) & set(FRAMEWORKS)
    }
    assert offenders == {}


def test_kazoo_is_confined_to_the_adapter() -> None:
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "zk_recipes").rglob("*.py")
        if "kazoo" in _imports(path)
    )
    # The adapter package, and the harness, which drives raw kazoo clients on purpose
    # (expiring another session).
    outside = [user for user in users if not user.startswith("zk_recipes/_client/kazoo/")]
    assert outside == ["zk_recipes/testing/_faults.py"]
    assert "zk_recipes/_client/kazoo/hooks.py" in users


def test_py_typed_markers_ship() -> None:
    assert (ROOT / "zk_recipes" / "py.typed").exists()
    for name in ("django", "celery", "flask"):
        assert (ROOT / "integrations" / f"zk_recipes_{name}" / "py.typed").exists()


@pytest.mark.parametrize(
    ("package", "framework"),
    [
        ("zk_recipes_django", "django"),
        ("zk_recipes_celery", "celery"),
        ("zk_recipes_flask", "flask"),
    ],
)
def test_integration_import_guard_names_the_extra(
    package: str, framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, framework, None)  # makes `import framework` fail
    monkeypatch.delitem(sys.modules, package, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'zk-recipes\[{framework}\]'"):
        importlib.import_module(package)
