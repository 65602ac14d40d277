"""docs/start/cli.md's commands, run as written against a real server: each exits 0.

The page's ``sh`` block after "Each line below is run by the test suite" is
read here, so the quick start cannot drift from what the command does.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.processes import CliRun

PAGE = Path(__file__).resolve().parents[2] / "docs" / "start" / "cli.md"


def _commands() -> list[list[str]]:
    text = PAGE.read_text()
    block = re.search(r"run by the test suite.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "the tested block is on the page"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_every_command_of_the_cli_quick_start_exits_0(cli_env: dict[str, str]) -> None:
    commands = _commands()
    assert len(commands) >= 5
    for argv in commands:
        assert argv[0] == "zk-recipes", argv
        code, out, err = CliRun(argv[1:], cli_env).wait(30)
        assert code == 0, f"{shlex.join(argv)} exited {code}: {out}{err}"
