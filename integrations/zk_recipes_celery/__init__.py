"""zk-recipes for Celery.

Only the import guard lives here so far; the integration itself lands with
its own issue. Importing this package without Celery installed fails at once
with the command that fixes it.
"""

from __future__ import annotations

try:
    import celery  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_celery needs Celery: install it with pip install 'zk-recipes[celery]'"
    ) from exc

__all__: list[str] = []
