"""gunicorn's configuration for the test app: our hooks, as docs/integrations/flask.md says."""

from zk_recipes_flask.gunicorn import post_worker_init, worker_exit  # noqa: F401
