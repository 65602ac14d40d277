"""Where a named lock or election lives: ``<prefix>/locks/<name>``, ``<prefix>/leaders/<name>``.

Every face names its locks the same way, so that ``zk-recipes lock X``,
``manage.py zklock X``, Django's ``@zk_lock("X")`` and Flask's
``@zk.locked("X")`` queue in one directory and exclude each other; the prefix
is the ``prefix`` setting (``DEFAULT_PREFIX`` unless told otherwise). An
absolute name is taken as the path itself, for locks shared with code that
names its own paths (a Curator peer, a plain ``zk_recipes.Lock``).

The path is checked here, where the name is still at hand, so a bad name
(``../x``, a control character, ``/zookeeper/x``) fails with a message about
the name a user typed, every problem at once, before any connection is made.
"""

from __future__ import annotations

from zk_recipes import DEFAULT_PREFIX, ConfigurationError, InvalidPathError, validate_path


def lock_path(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The lock node directory of ``name``: an absolute path is used as it is."""
    return _named_path(name, prefix, "locks")


def leader_path(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The election directory of ``name``: an absolute path is used as it is."""
    return _named_path(name, prefix, "leaders")


def _named_path(name: str, prefix: str, kind: str) -> str:
    what = f"{kind[:-1]} name"
    like = f"a name like 'db-migrate' or an absolute path like '/app/{kind}/db-migrate'"
    if not isinstance(name, str) or not name.strip("/"):
        raise ConfigurationError(f"a {what} must be non-empty: {like}, got {name!r}")
    if name.startswith("/"):
        return validate_path(name, what=what, writable=True)
    path = f"{prefix.rstrip('/')}/{kind}/{name}"
    try:
        return validate_path(path, what=f"{what} {name!r}: its path", writable=True)
    except InvalidPathError as exc:
        raise InvalidPathError(f"{exc}; give {like}") from None
