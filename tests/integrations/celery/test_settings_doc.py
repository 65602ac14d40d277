"""docs/settings.md lists Celery's own settings as the integration declares them.

The table under "Celery settings" is generated from the settings the
integration declares to the core's reader (``python -m
tests.integrations.celery.test_settings_doc`` rewrites it), as the core's table is
from ``zk_recipes.SETTINGS`` (tests/test_docs.py).
"""

from __future__ import annotations

import zk_recipes_celery._config as celery_config
from tests.test_docs import SETTINGS_DOC, generated_tables, own_settings_table, rewrite_tables
from zk_recipes import SETTINGS, Spelling


def _table() -> str:
    return own_settings_table(celery_config._CELERY_SETTINGS, Spelling.CELERY)


def test_the_celery_table_is_generated_from_the_integration() -> None:
    assert generated_tables(SETTINGS_DOC.read_text()).get("celery") == _table(), (
        "run python -m tests.integrations.celery.test_settings_doc"
    )


def test_celery_settings_do_not_shadow_the_core_ones() -> None:
    core = {s.name for s in SETTINGS}
    assert core.isdisjoint(s.name for s in celery_config._CELERY_SETTINGS)


if __name__ == "__main__":
    SETTINGS_DOC.write_text(rewrite_tables(SETTINGS_DOC.read_text(), {"celery": _table()}))
