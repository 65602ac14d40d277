"""zk-recipes for Django.

Only the import guard lives here so far; the integration itself lands with
its own issue. Importing this package without Django installed fails at once
with the command that fixes it.
"""

from __future__ import annotations

try:
    import django  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_django needs Django: install it with pip install 'zk-recipes[django]'"
    ) from exc

__all__: list[str] = []
