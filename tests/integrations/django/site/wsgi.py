"""The test site as a WSGI application (gunicorn serves it in the announcement tests)."""

from __future__ import annotations

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
