"""``flask zk ...``: the operations core's commands with the app's configuration."""

from __future__ import annotations

from flask.cli import AppGroup

zk_group = AppGroup("zk", help="Coordinate through ZooKeeper with this app's settings.")
