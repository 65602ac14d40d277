"""The ``conftest.py`` of the testing example on docs/integrations/celery.md.

pytest runs ``test_jobs_page.py`` beside it with these plugins, in a process of
its own (tests/integrations/celery/test_celery_page.py starts it), as a project
of yours would.
"""

# --8<-- [start:conftest]
pytest_plugins = [
    "zk_recipes.testing.pytest_plugin",  # zk_hosts, zk_namespace, zk_client, ...
    "zk_recipes_celery.testing.pytest_plugin",  # redis_server, redis_url, celery_project
]
# --8<-- [end:conftest]
