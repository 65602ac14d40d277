"""Child processes in the command faces' tests: a ``zk-recipes`` run, a process group."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zk_recipes.testing import wait_until


class CliRun:
    """``python -m zk_recipes ARGS`` as a child process; ``popen`` goes to ``subprocess.Popen``."""

    def __init__(self, args: Sequence[str], env: dict[str, str], **popen: Any) -> None:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zk_recipes", *args], env=env, text=True, **popen
        )

    def wait(self, timeout: float = 30.0) -> tuple[int, str, str]:
        """Exit code, stdout and stderr once it ended (``TimeoutExpired`` after ``timeout``)."""
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out or "", err or ""

    def running(self) -> bool:
        return self.process.poll() is None


def live_in_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group ``pgid``, read from /proc."""
    live = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            live.append(int(name))
    return live


def written_int(path: Path, what: str, timeout: float = 20.0) -> int:
    """The number a child writes to ``path`` (``echo $$ > path``), once it is all there.

    The file appears (empty) before the shell writes into it: waiting for it
    to exist alone reads ``''`` now and then.
    """
    found: list[int] = []

    def whole() -> bool:
        try:
            text = path.read_text()
        except FileNotFoundError:
            return False
        if text.strip().isdigit():
            found.append(int(text))
            return True
        return False

    wait_until(whole, what, timeout=timeout)
    return found[-1]
