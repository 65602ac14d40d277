"""``holders_table``: what ``holders()`` found, as a plain-text table for people.

One row per contender node (holders first, then the queue in order; a
queue: a row with its length, then one per claimed item), with
the owner's host, pid (and, for a holder that ``zk-recipes lock``/``leader``
runs a command for, the command's pid and process group) and id, how long
ago it queued (a holder: how long it has held, ``≤`` for a leader, whose
term's start is only bounded), its fencing token and session. Cells are cut
to 40 characters and control characters replaced: owner data is whatever a
process wrote, and it goes to a terminal. ``zk-recipes holders`` prints it;
programs want ``RecipeHolders.as_dict()``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from zk_recipes._inspect.recipe_holders import RecipeHolders
from zk_recipes._types import Owner

_COLUMNS = ("RECIPE", "KIND", "ROLE", "HOST", "PID", "ID", "SINCE", "TOKEN", "SESSION")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def holders_table(report: Sequence[RecipeHolders], *, now: float | None = None) -> str:
    """``report`` as a plain-text table, one row per node (ages counted from ``now``)."""
    if not report:
        return "no locks, semaphores, elections or queues found"
    at = time.time() if now is None else now
    rows = [_COLUMNS]
    for recipe in report:
        if recipe.items is not None:
            size = f"{recipe.items} items" + (f", {recipe.dead} dead" if recipe.dead else "")
            rows.append((recipe.path, recipe.kind, size, "", "", "", "", "", ""))
        elif not recipe.holders and not recipe.waiting:
            rows.append((recipe.path, recipe.kind, "-", "", "", "", "", "", ""))
        for rank, node in enumerate((*recipe.holders, *recipe.waiting)):
            role = "holder" if node.holding else f"waiting #{rank - len(recipe.holders) + 1}"
            if recipe.items is not None:
                role = "claim"  # a consumer's hold on the item named under ID
                if node.attempts:
                    role += f" (attempt {node.attempts + 1})"
            owner = node.owner
            host = owner.host or (node.data if node.identifier is None else None)
            rows.append(
                (
                    recipe.path,
                    recipe.kind,
                    f"{role} ({node.mode})" if node.mode else role,
                    _cell(host),
                    _cell(_pids(owner, node.holding)),
                    _cell(node.identifier),
                    node.age(at),
                    str(node.fencing_token),
                    f"{node.session_id:#x}",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _pids(owner: Owner, holding: bool) -> str | None:
    """The owner's pid, and a holder's command and its group when a supervisor names them."""
    if owner.pid is None or not holding or owner.command_pid is None:
        return None if owner.pid is None else str(owner.pid)
    group = "" if owner.command_pgid is None else f", group {owner.command_pgid}"
    return f"{owner.pid} (command {owner.command_pid}{group})"


def _cell(value: object, limit: int = 40) -> str:
    if value is None or value == "":
        return "-"
    text = _UNPRINTABLE.sub("?", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"
