"""Recipe layouts that faces add to ``holders()``: their own kinds, built on the core's recipes.

``holders()`` recognises the core's recipes from their nodes alone (a lock,
a read-write lock, a semaphore, a leader latch). A face that builds a recipe
of its own on one of them (Celery's singleton tasks are locks at
``<prefix>/singleton/<task>/<key>``, its beat election a latch at
``<prefix>/beat/<name>``) describes where its directories are with a
``RecipeLayout``, and ``holders()`` reports them under the face's kind
instead of the core one. The core knows no face by name.

Two ways to register, both the face's:

- ``register_layout(layout)``, at run time;
- an entry point in the face's distribution, group ``zk_recipes.layouts``,
  naming an iterable of layouts (``zk_recipes_celery._layouts:LAYOUTS``).
  Entry points are loaded once, the first time ``holders()`` asks, so
  ``zk-recipes holders`` in a process that never imported the face still
  names its nodes. One that fails to load (its framework is not installed)
  is skipped, and said at DEBUG on logger ``zk_recipes.holders``.

The first layout that matches a directory wins, in registration order
(entry points after those registered at run time before the first ask).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import threading
from collections.abc import Callable, Iterable

from zk_recipes._errors import ConfigurationError, WrongTypeError
from zk_recipes._types import Owner

log = logging.getLogger("zk_recipes.holders")

#: The entry point group a face's distribution names its layouts in.
ENTRY_POINT_GROUP = "zk_recipes.layouts"

#: The core kinds ``holders()`` recognises from the nodes alone, which a layout builds on.
LOCK = "lock"
READ_WRITE_LOCK = "read-write lock"
SEMAPHORE = "semaphore"
LEADER_LATCH = "leader latch"
#: Not a recipe: a plain node a face keeps (a marker), reported as its one holder (nodes.py).
NODE = "node"
BASE_KINDS = (LOCK, READ_WRITE_LOCK, SEMAPHORE, LEADER_LATCH, NODE)


@dataclasses.dataclass(frozen=True)
class RecipeLayout:
    """Where a face keeps a recipe of its own kind, built on one of the core's.

    ``RecipeLayout("celery beat", base="leader latch", path="beat/*")``:
    a leader latch whose directory is ``<anything>/beat/<one segment>`` is
    reported as kind "celery beat".
    """

    #: The kind ``holders()`` reports (``RecipeHolders.kind``), like "celery singleton".
    kind: str
    #: The core kind its nodes are: "lock", "read-write lock", "semaphore" or "leader
    #: latch"; or "node": a plain node of the face's own (a marker), not a directory.
    base: str
    #: The directory's last segments, "/"-separated; ``*`` matches any one segment
    #: (for base "node": the node's own last segments).
    path: str
    #: For node data that is not our owner JSON: the owner it names, or None
    #: (Celery's beat election writes ``host:pid``). For base "node" it reads every
    #: node's data, and None leaves the node out of the report.
    owner_of_data: Callable[[str], Owner | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise WrongTypeError(f"a layout's kind must be a non-empty str, got {self.kind!r}")
        if self.base not in BASE_KINDS:
            raise ConfigurationError(
                f"layout {self.kind!r}: base must be one of {', '.join(map(repr, BASE_KINDS))}, "
                f"got {self.base!r}"
            )
        if not isinstance(self.path, str) or not all(self.path.split("/")):
            raise ConfigurationError(
                f"layout {self.kind!r}: path must be the directory's last segments, like "
                f"'singleton/*/*' (no leading, trailing or doubled '/'), got {self.path!r}"
            )
        if self.owner_of_data is not None and not callable(self.owner_of_data):
            raise WrongTypeError(
                f"layout {self.kind!r}: owner_of_data must be a callable or None, "
                f"got {self.owner_of_data!r}"
            )

    def matches(self, base: str, path: str) -> bool:
        """Whether a ``base`` recipe at ``path`` (absolute) is one of this layout's."""
        if base != self.base:
            return False
        want = self.path.split("/")
        have = path.split("/")[1:]
        if len(have) < len(want):
            return False
        tail = have[len(have) - len(want) :]
        return all(w == "*" or w == h for w, h in zip(want, tail, strict=True))


_registered: list[RecipeLayout] = []
_guard = threading.Lock()
_loaded = False


def register_layout(layout: RecipeLayout) -> None:
    """Report the recipes at ``layout``'s places under its kind (again: no change)."""
    if not isinstance(layout, RecipeLayout):
        raise WrongTypeError(f"register_layout takes a zk_recipes.RecipeLayout, got {layout!r}")
    with _guard:
        if layout not in _registered:
            _registered.append(layout)


def layouts() -> tuple[RecipeLayout, ...]:
    """Every layout known: those registered, then the entry points' (loaded once)."""
    global _loaded
    with _guard:
        if not _loaded:
            _loaded = True
            for layout in _from_entry_points():
                if layout not in _registered:
                    _registered.append(layout)
        return tuple(_registered)


def kind_of(base: str, path: str) -> RecipeLayout | None:
    """The first layout a ``base`` recipe at ``path`` matches, if any."""
    return next((layout for layout in layouts() if layout.matches(base, path)), None)


def _from_entry_points() -> Iterable[RecipeLayout]:
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = list(entry.load())
        except ImportError as exc:  # its framework is missing: that face is not in use here
            log.debug("layouts %s (%s) not loaded: %r", entry.name, entry.value, exc)
            continue
        except Exception:  # a face's bug must not break holders() for everyone else
            log.warning("layouts %s (%s) failed to load", entry.name, entry.value, exc_info=True)
            continue
        for layout in found:
            if isinstance(layout, RecipeLayout):
                yield layout
            else:
                log.debug("entry point %s gave %r, not a RecipeLayout", entry.name, layout)
