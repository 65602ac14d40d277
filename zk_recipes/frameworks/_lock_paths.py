"""Where a named lock or election lives: ``<prefix>/locks/<name>``, ``<prefix>/leaders/<name>``.

Every face names its locks the same way, so that ``zk-recipes lock X``,
``manage.py zklock X``, Django's ``@zk_lock("X")`` and Flask's
``@zk.locked("X")`` queue in one directory and exclude each other; the prefix
is the ``prefix`` setting (``DEFAULT_PREFIX`` unless told otherwise). An
absolute name is taken as the path itself, for locks shared with code that
names its own paths (a Curator peer, a plain ``zk_recipes.Lock``).
"""

from __future__ import annotations

from zk_recipes import DEFAULT_PREFIX, ConfigurationError


def lock_path(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The lock node directory of ``name``: an absolute path is used as it is."""
    return _named_path(name, prefix, "locks")


def leader_path(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The election directory of ``name``: an absolute path is used as it is."""
    return _named_path(name, prefix, "leaders")


def _named_path(name: str, prefix: str, kind: str) -> str:
    if not isinstance(name, str) or not name.strip("/"):
        raise ConfigurationError(
            f"a {kind[:-1]} name must be a non-empty string like 'db-migrate', got {name!r}"
        )
    if name.startswith("/"):
        return name
    return f"{prefix.rstrip('/')}/{kind}/{name}"
