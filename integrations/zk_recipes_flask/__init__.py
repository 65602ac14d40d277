"""zk-recipes for Flask.

Only the import guard lives here so far; the integration itself lands with
its own issue. Importing this package without Flask installed fails at once
with the command that fixes it.
"""

from __future__ import annotations

try:
    import flask  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_flask needs Flask: install it with pip install 'zk-recipes[flask]'"
    ) from exc

__all__: list[str] = []
