"""gunicorn's configuration for the test site: our hooks, as docs/integrations/django.md says."""

from zk_recipes_django.gunicorn import post_worker_init, worker_exit  # noqa: F401
