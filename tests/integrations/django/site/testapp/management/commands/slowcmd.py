"""A command the zklock tests run: it notes its start and end in files under ``--dir``.

It waits for a ``go`` file (or ``--seconds``), so a test decides when it ends,
and exits with ``--code`` (through CommandError when not 0).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):  # type: ignore[misc]
    help = "Note the start, wait for DIR/go or --seconds, note the end."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dir", required=True)
        parser.add_argument("--seconds", type=float, default=60.0)
        parser.add_argument("--code", type=int, default=0)
        parser.add_argument("--tag", default="run")

    def handle(self, *args: Any, **options: Any) -> None:
        here = Path(options["dir"])
        here.mkdir(parents=True, exist_ok=True)
        tag = options["tag"]
        (here / f"{tag}.started").write_text(str(os.getpid()))
        deadline = time.monotonic() + options["seconds"]
        while not (here / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (here / f"{tag}.ended").write_text(str(os.getpid()))
        if options["code"]:
            raise CommandError(
                f"slowcmd failed on purpose with {options['code']}", returncode=options["code"]
            )
        self.stdout.write(f"slowcmd {tag} done")
