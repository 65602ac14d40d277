"""The examples of docs/settings.md, as the page shows them; the test suite reads them.

Settings name hosts that do not exist (``zk1:2181``) and files under
``/etc/zookeeper``; ``main`` reads every example with the reader the
frameworks use (``zk_recipes.read_settings``), the files swapped for
certificates of its own (the reader loads them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from types import SimpleNamespace
from typing import Any

from zk_recipes import RetryForever, Spelling, TlsOptions, read_settings


class App:
    """Stands in for ``Flask(__name__)`` (its ``config``) and ``Celery("proj")`` (its ``conf``)."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.conf = SimpleNamespace()


def django() -> dict[str, Any]:
    # --8<-- [start:django]
    # Django settings.py
    ZK_RECIPES = {
        "default": {
            "HOSTS": "zk1:2181,zk2:2181,zk3:2181",
            "NAMESPACE": "shop",
            "SESSION_TIMEOUT": 10.0,
            "AUTH": ["digest:shop:secret"],
            "TLS": {"CA_FILE": "/etc/zookeeper/ca.pem"},
            "RETRY": {"POLICY": "ExponentialBackoffRetry", "BASE_SLEEP": 0.1, "MAX_RETRIES": 5},
        },
        "reports": {"HOSTS": "zk-reports:2181"},  # another alias
    }
    # --8<-- [end:django]
    return ZK_RECIPES


def flask(app: App) -> None:
    # --8<-- [start:flask]
    # given: app (your Flask app, Flask(__name__))
    app.config["ZK_RECIPES_HOSTS"] = "zk1:2181,zk2:2181,zk3:2181"
    app.config["ZK_RECIPES_RETRY"] = {"policy": "RetryForever", "interval": 1.0}
    # --8<-- [end:flask]


def celery(app: App) -> None:
    # --8<-- [start:celery]
    # given: app (your Celery app, Celery("proj"))
    app.conf.zk_recipes_hosts = "zk1:2181,zk2:2181,zk3:2181"
    app.conf.zk_recipes_session_timeout = 10.0
    # --8<-- [end:celery]


# fmt: off
# --8<-- [start:retry]
retry_policies = [
    {"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 5},  # the default
    {"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 10, "max_sleep": 5.0},
    {"policy": "BoundedExponentialBackoffRetry", "base_sleep": 0.1, "max_sleep": 5.0,
     "max_retries": 10},
    {"policy": "PlateauRetry", "base_sleep": 0.1, "backoff_retries": 5,
     "plateau_low": 2.0, "plateau_high": 4.0},
    {"policy": "RetryNTimes", "n": 3, "sleep": 0.5},
    {"policy": "RetryOneTime", "sleep": 1.0},
    {"policy": "RetryForever", "interval": 1.0},
    {"policy": "RetryUntilElapsed", "max_elapsed": 30.0, "sleep": 1.0},
]
# --8<-- [end:retry]
# fmt: on

# --8<-- [start:tls]
tls = {
    "CA_FILE": "/etc/zookeeper/ca.pem",
    "CERT_FILE": "/etc/zookeeper/client.pem",
    "KEY_FILE": "/etc/zookeeper/client.key",
}  # ZK_RECIPES["default"]["TLS"]
# --8<-- [end:tls]


def _with_files(value: Any, directory: str) -> Any:
    """``value`` with each ``/etc/zookeeper/NAME`` replaced by ``directory``/NAME."""
    if isinstance(value, dict):
        return {k: _with_files(v, directory) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("/etc/zookeeper/"):
        return os.path.join(directory, os.path.basename(value))
    return value


def _certificates(directory: str) -> None:
    """A self-signed client certificate and its key, which is its own CA: what the reader loads."""
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec"),
            *("-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"),
            *("-subj", "/CN=zk-recipes example"),
            *("-keyout", "client.key", "-out", "client.pem"),
        ],
        cwd=directory,
        check=True,
        capture_output=True,
        timeout=30,
    )
    shutil.copy(os.path.join(directory, "client.pem"), os.path.join(directory, "ca.pem"))


def main(hosts: str) -> None:
    """Every example reads, and means what the page says (``hosts`` is not needed)."""
    with tempfile.TemporaryDirectory() as directory:
        _certificates(directory)
        zk_recipes = _with_files(django(), directory)
        default = read_settings(zk_recipes, Spelling.DJANGO)
        assert default.client.session_timeout == 10.0
        assert default.client.namespace == "/shop"
        assert isinstance(default.client.tls, TlsOptions)
        assert read_settings(zk_recipes, Spelling.DJANGO, alias="reports").client.hosts

        certified = {"default": {"HOSTS": "zk1:2181", "TLS": _with_files(tls, directory)}}
        options = read_settings(certified, Spelling.DJANGO).client.tls
        assert options is not None
        assert options.cert_file
        assert options.key_file

    app = App()
    flask(app)
    assert isinstance(read_settings(app.config, Spelling.FLASK).client.retry_policy, RetryForever)
    celery(app)
    assert read_settings(vars(app.conf), Spelling.CELERY).client.session_timeout == 10.0

    for policy in retry_policies:
        environment = {"ZK_RECIPES_HOSTS": "zk1", "ZK_RECIPES_RETRY": policy}
        assert read_settings(environment, Spelling.ENV).given == {"hosts", "retry"}, policy


if __name__ == "__main__":
    main("")
    print("settings: ok")
