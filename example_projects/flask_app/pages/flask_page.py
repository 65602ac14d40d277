"""The examples of docs/integrations/flask.md, as the page shows them; the test suite runs them.

Each example is a named section (``# --8<-- [start:NAME]``) that the page
includes. Views need an app: the sections that add them sit in functions
taking one (``add_...(app)``), the app made by ``create_app`` with the tests'
server in ``test_config``; the sections that make an app of their own
return it. ``close_month`` and ``refresh_rates`` run in the app context of
whichever app calls them.
tests/integrations/flask/test_flask_page.py runs every section against a
real ZooKeeper; the shop's own code is stood in for by ``_shop_stand_ins``.
"""

# The extension's example is two files of the shop, the imports of each at its top (E402).
# ruff: noqa: E402

from __future__ import annotations

from collections.abc import Callable

from _shop_stand_ins import Counter, Ledger, Mailer, Reports, current_user, get_db, pause

# --8<-- [start:extension]
# shop/extensions.py
from zk_recipes_flask import ZkRecipes

zk = ZkRecipes()


# shop/__init__.py
from collections.abc import Mapping
from typing import Any

from flask import Flask


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config["ZK_RECIPES_HOSTS"] = "zk1:2181,zk2:2181,zk3:2181"
    app.config["ZK_RECIPES_NAMESPACE"] = "shop"
    if test_config is not None:  # the tests' own ZooKeeper
        app.config.update(test_config)
    zk.init_app(app)
    return app


# --8<-- [end:extension]

mailer = Mailer()
export_orders = Counter()
rebuild_search_index = Counter()
refresh_exchange_rates = Counter()
reports = Reports()
build_report, cached_report = reports.build, reports.cached
ledger = Ledger()
render_invoice_pdf = pause


def shared_defaults() -> ZkRecipes:
    # --8<-- [start:defaults]
    from zk_recipes_flask import ZkRecipes

    zk = ZkRecipes(session_timeout=6.0, retry={"policy": "RetryNTimes", "n": 3, "sleep": 0.5})
    # --8<-- [end:defaults]
    return zk


def add_exports(app: Flask) -> None:
    # --8<-- [start:client]
    # given: app (your Flask app), zk (your ZkRecipes extension), export_orders (your work)
    from zk_recipes import Semaphore

    @app.post("/exports")
    def start_export() -> str:
        with Semaphore(zk.client, "/exports", max_leases=3):  # three exports at most
            export_orders()
        return "exported"

    # --8<-- [end:client]


def locked_views() -> tuple[Flask, ZkRecipes, Callable[[], None]]:
    # --8<-- [start:locked]
    # given: mailer (your mail sender), rebuild_search_index (your work)
    from flask import Flask

    from zk_recipes_flask import ZkRecipes

    app = Flask(__name__)
    app.config.from_prefixed_env()  # FLASK_ZK_RECIPES_HOSTS=zk1:2181,zk2:2181,zk3:2181
    zk = ZkRecipes(app)

    @app.post("/invoices/<int:id>/send")
    @zk.locked("invoice-{id}")  # one request per invoice at a time
    def send_invoice(id: int) -> str:
        mailer.send(f"invoice {id}")
        return f"invoice {id} sent"

    @zk.locked("rebuild-index", timeout=30)  # wait up to 30 s for the previous one
    def rebuild_index() -> None:
        rebuild_search_index()

    # --8<-- [end:locked]
    return app, zk, rebuild_index


def add_busy_answers(app: Flask) -> None:
    # --8<-- [start:on-busy]
    # given: app (your Flask app), zk (your ZkRecipes extension), mailer (your mail sender)
    from flask import render_template
    from flask.typing import ResponseReturnValue

    from zk_recipes_flask import LockBusy

    def come_back_later(id: int) -> tuple[str, int]:
        return render_template("busy.html", id=id), 409

    @app.post("/invoices/<int:id>/send")
    @zk.locked("invoice-{id}", on_busy=come_back_later)
    def send_invoice(id: int) -> str:
        mailer.send(f"invoice {id}")
        return f"invoice {id} sent"

    @app.errorhandler(LockBusy)  # or, for every 423, @app.errorhandler(423)
    def busy(exc: LockBusy) -> ResponseReturnValue:
        return {"error": "busy, try again shortly"}, exc.code

    # --8<-- [end:on-busy]


def add_reports(app: Flask) -> None:
    # --8<-- [start:on-unavailable]
    # given: app (your Flask app), zk (your ZkRecipes extension)
    # given: build_report, cached_report (your reports: made now, or the last one made)
    @app.get("/reports/<int:id>")
    @zk.locked("report-{id}", on_unavailable=lambda id: (cached_report(id), 200))
    def report(id: int) -> str:
        return build_report(id)

    # --8<-- [end:on-unavailable]


def add_report_view(app: Flask) -> None:
    # --8<-- [start:class-based]
    # given: app (your Flask app), zk (your ZkRecipes extension), build_report (your report)
    from flask.views import MethodView

    class ReportView(MethodView):
        decorators = [zk.locked("report-{id}")]

        def get(self, id: int) -> str:
            return build_report(id)

    app.add_url_rule("/reports/<int:id>", view_func=ReportView.as_view("report"))
    # --8<-- [end:class-based]


# --8<-- [start:lock-block]
# given: zk (your ZkRecipes extension), ledger (your books)
# given: refresh_exchange_rates (your work)
def close_month(month: str) -> None:
    with zk.lock(f"close-month-{month}", timeout=60) as lock:
        ledger.close(month, fencing_token=lock.fencing_token)


async def refresh_rates() -> None:
    async with zk.lock("refresh-rates", timeout=0):
        refresh_exchange_rates()


# --8<-- [end:lock-block]


def add_fenced_send(app: Flask) -> None:
    # --8<-- [start:fencing]
    # given: app (your Flask app), zk (your ZkRecipes extension)
    # given: get_db (your sqlite3 connection, as in Flask's tutorial), mailer (your mail sender)
    # given: render_invoice_pdf (your work)
    from flask import g

    @app.post("/invoices/<int:id>/send")
    @zk.locked("invoice-{id}")
    def send_invoice(id: int) -> tuple[str, int]:
        token = g.zk_lock.fencing_token
        render_invoice_pdf()
        # Storage keeps the highest token it has seen and refuses older ones.
        db = get_db()
        with db:  # one transaction: committed at the end of the block
            result = db.execute(
                "UPDATE invoice SET fence = ?, status = 'sent' WHERE id = ? AND fence < ?",
                (token, id, token),
            )
        if result.rowcount == 0:
            return "overtaken by a newer holder", 409
        mailer.send(f"invoice {id}")
        return f"invoice {id} sent", 200

    # --8<-- [end:fencing]


def add_status(app: Flask) -> None:
    # --8<-- [start:status]
    # given: app (your Flask app), zk (your ZkRecipes extension)
    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")
    # --8<-- [end:status]


def add_guarded_status(app: Flask) -> None:
    # --8<-- [start:staff-only]
    # given: app (your Flask app), zk (your ZkRecipes extension)
    # given: current_user (flask-login's: the user of this request)
    from flask import abort, request

    status = zk.status_blueprint()

    @status.before_request
    def staff_only() -> None:
        if request.endpoint != "zk_recipes_status.health" and not current_user.is_staff:
            abort(404)

    app.register_blueprint(status, url_prefix="/zk")
    # --8<-- [end:staff-only]


def announced_app(test_config: Mapping[str, Any]) -> tuple[Flask, ZkRecipes]:
    app = Flask(__name__)
    app.config.update(test_config)
    # --8<-- [start:service]
    # given: app (your Flask app, with its ZK_RECIPES_HOSTS)
    from zk_recipes_flask import ZkRecipes

    app.config["ZK_RECIPES_SERVICE"] = {"NAME": "shop", "PORT": 5000}
    zk = ZkRecipes(app)
    # --8<-- [end:service]
    return app, zk


def add_metrics(app: Flask) -> None:
    """docs/operations.md's Flask example: the metrics of this process, for Prometheus."""
    # --8<-- [start:metrics]
    # given: app (your Flask app)
    import prometheus_client
    from flask import Response

    @app.get("/metrics")
    def metrics_view() -> Response:
        return Response(
            prometheus_client.generate_latest(), mimetype=prometheus_client.CONTENT_TYPE_LATEST
        )

    # --8<-- [end:metrics]
