"""A command that swallows every exception (LockLost too) and runs on: the worst case.

``zklock`` run from the command line must end the process anyway once the
grace period after a loss is over.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):  # type: ignore[misc]
    help = "Note the start, then run until DIR/go exists, swallowing every exception."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dir", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        here = Path(options["dir"])
        here.mkdir(parents=True, exist_ok=True)
        (here / "stubborn.started").write_text(str(os.getpid()))
        while not (here / "go").exists():
            try:
                time.sleep(0.02)
            except BaseException as exc:
                (here / "stubborn.caught").write_text(type(exc).__name__)
