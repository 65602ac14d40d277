"""ZkScheduler: a beat schedule held in ZooKeeper, read by every beat, sent by the leader.

``celery beat -S zk_recipes_celery.beat:ZkScheduler``: redbeat's model on
ZooKeeper. The entries live in ZooKeeper (the layout and JSON are the
framework kit's, ``zk_recipes.frameworks._beat_schedule``), so they can be
added, changed, disabled and removed at runtime (``beat_schedule(app)`` of
_celery_schedules, or ``zk-recipes beat ...``) and every beat sees the same schedule, without a
database or a shelve file. ``app.conf.beat_schedule`` is imported once at
start-up: each entry it names is written unless the same definition is
there already; entries added at runtime are kept.

**Reading.** Each beat keeps a ``TreeCache`` of ``<prefix>/schedule/<beat
name>`` (entries and last runs): a tick reads nothing from the server, and
a change reaches every beat with the server's notification. A disabled
entry is not scheduled. An entry this beat cannot run (it does not parse,
Celery refuses its schedule, or it is solar and ``ephem`` is missing here)
is logged once per version of its node, with the node's path and the
reason, and left out; every other entry keeps ticking. Writers check
entries the same way first (``zk_recipes.frameworks.check_schedule``), so
only a node written by hand, by an older version or by another tool is
met here.

**Sending: the leader only, each tick at most once.** The same election and
gate as ``LeaderScheduler`` (``LeaderGate``): standbys send nothing. Before
it sends a due entry, the leader records the run (``runs/<entry name>``:
``last_run_at``, ``total_run_count``) with a versioned write against the
version its cache holds; the send happens only if that write wins. So:

- two beats that both believe they lead for a moment (a partition) cannot
  both send one tick: one write wins;
- a leader killed between its write and its send loses that tick (at most
  once, never twice);
- a write whose reply is lost (the connection broke after the server applied
  it, or a resent write meets its own first copy as BadVersion) is read back:
  the node holding exactly what this beat wrote is its run, and it is sent,
  once; a read that cannot be done either leaves the tick unsent (at most
  once again);
- a tick due while no beat leads (the leader killed -9, its session not yet
  expired) is sent by the next leader as soon as it is elected, once, however
  many periods passed (Celery's ``is_due`` counts from ``last_run_at``, which
  the next leader reads from ZooKeeper: a standby never advances it);
- last runs survive a restart of every beat: they are in ZooKeeper.

**Standbys** tick like the leader but neither send nor write; when a
standby becomes leader its heap is rebuilt from the last runs in ZooKeeper.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
import time
from typing import Any

from celery import beat

from zk_recipes import (
    BadVersionError,
    CacheEvent,
    CacheEventType,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    SessionLost,
    TreeCache,
    ZkRecipesError,
    ZkTimeoutError,
    ZnodeStat,
)
from zk_recipes.frameworks import (
    BeatEntry,
    BeatSchedule,
    InvalidEntry,
    LastRun,
    ScheduleError,
    check_dependencies,
    parse_entry,
    schedule_path,
)
from zk_recipes_celery._beat_election import BeatRole
from zk_recipes_celery._beat_gate import pending_role
from zk_recipes_celery._celery_schedules import entry_from_conf, import_entry, to_celery
from zk_recipes_celery._lifecycle import app_state

log = logging.getLogger("zk_recipes.celery.beat")

#: How long a beat waits for its first read of the schedule at start-up (seconds).
LOAD_TIMEOUT = 30.0
#: How long a leader tries to read back a run record whose write got no reply (seconds).
RECORD_READ_TIMEOUT = 10.0


class ZkStoreScheduler(beat.Scheduler):  # type: ignore[misc]
    """The store half of ZkScheduler: entries from the cache, last runs written by the leader."""

    #: The longest a tick sleeps (seconds; ``beat_max_loop_interval`` overrides): how soon
    #: an entry added at runtime is looked at. A tick reads nothing from the server.
    max_interval = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._zk_changed = threading.Event()
        self._zk_entries: dict[str, beat.ScheduleEntry] = {}
        self._zk_claimed: set[str] = set()
        #: Runs this beat recorded, and the version its write made (the cache may lag).
        self._zk_recorded: dict[str, tuple[LastRun, int]] = {}
        #: Entries skipped as invalid, and the version (mzxid) of their node said so.
        self._zk_invalid: dict[str, int] = {}
        self._zk_was_leader = False
        super().__init__(*args, **kwargs)

    # -- start-up ------------------------------------------------------------------
    def setup_schedule(self) -> None:
        state = app_state(self.app)
        config = state.config
        client = state.process_client.get()
        self._zk_store = store = BeatSchedule(client, config.prefix, config.beat_name)
        for path in (store.entries_path, store.runs_path):
            with contextlib.suppress(NodeExistsError):
                client.create(path, parents=True)
        for name, spec in (self.app.conf.beat_schedule or {}).items():
            try:
                if import_entry(store, entry_from_conf(name, spec)):
                    log.info("beat: schedule entry %s written to %s", name, store.entries_path)
            except (ScheduleError, KeyError, TypeError, ValueError) as exc:
                log.error("beat: schedule entry %s of beat_schedule not stored: %s", name, exc)
        self._zk_cache = TreeCache(client, store.path, max_depth=2)
        self._zk_cache.listen(self._on_change)
        self._zk_cache.start()
        if not self._zk_cache.wait_initialized(LOAD_TIMEOUT):
            log.warning("beat: the schedule at %s is not read yet; starting empty", store.path)
        self._rebuild()

    def _on_change(self, event: CacheEvent) -> None:
        if event.type is not CacheEventType.CONNECTION:
            self._zk_changed.set()

    # -- the schedule Celery reads ---------------------------------------------------
    def _rebuild(self) -> None:
        """The entries from the cache, with their last runs as ZooKeeper has them."""
        self._zk_changed.clear()
        store = self._zk_store
        nodes = self._zk_cache.current()
        built: dict[str, beat.ScheduleEntry] = {}
        invalid: dict[str, int] = {}
        for name in self._zk_cache.children(store.entries_path):
            path = f"{store.entries_path}/{name}"
            node = nodes.get(path)
            if node is None:
                continue
            entry = parse_entry(name, node.data or b"", path)
            if isinstance(entry, InvalidEntry):
                self._skip(invalid, name, path, node.stat.mzxid, entry.reason)
                continue
            if not entry.enabled:
                continue
            run_node = nodes.get(f"{store.runs_path}/{name}")
            run = LastRun.from_bytes(run_node.data or b"") if run_node is not None else None
            ours = self._zk_recorded.get(name)  # a claim of ours the cache may not show yet
            if ours is not None and (run is None or ours[0].last_run_at > run.last_run_at):
                run = ours[0]
            if run is None:  # never run: its period counts from when it was added
                run = LastRun(node.stat.ctime / 1000.0, 0)
            try:
                check_dependencies(entry.schedule)
                built[name] = self._entry(entry, run)
            except Exception as exc:  # whatever Celery raises: this entry only is skipped
                self._skip(invalid, name, path, node.stat.mzxid, str(exc))
        self._zk_entries = built
        self._zk_invalid = invalid

    def _skip(self, invalid: dict[str, int], name: str, path: str, version: int, why: str) -> None:
        """Leave an entry out of the schedule; say so once per version of its node."""
        invalid[name] = version
        if self._zk_invalid.get(name) != version:
            log.error(
                "beat: schedule entry %s is skipped, this beat cannot run it: %s. Every other "
                "entry keeps its schedule; fix it with zk-recipes beat add (or beat_schedule(app)"
                ".add), or remove it",
                path,
                why,
            )

    def _entry(self, entry: BeatEntry, run: LastRun) -> beat.ScheduleEntry:
        return self.Entry(
            name=entry.name,
            task=entry.task,
            schedule=to_celery(entry.schedule, self.app),
            args=entry.args,
            kwargs=entry.kwargs,
            options=entry.options,
            last_run_at=datetime.datetime.fromtimestamp(run.last_run_at, datetime.timezone.utc),
            total_run_count=run.total_run_count,
            app=self.app,
        )

    @property
    def schedule(self) -> dict[str, beat.ScheduleEntry]:
        return self._zk_entries

    def tick(self, *args: Any, **kwargs: Any) -> Any:
        leader = bool(getattr(self, "_zk_election", None)) and self._is_leader()
        if self._zk_changed.is_set() or (leader and not self._zk_was_leader):
            self._rebuild()  # a change, or this beat just took over: ZooKeeper's last runs
            self._heap = None
        self._zk_was_leader = leader
        return super().tick(*args, **kwargs)

    def _is_leader(self) -> bool:
        return bool(self._zk_election.role() is BeatRole.LEADER)

    # -- a due entry -----------------------------------------------------------------
    def reserve(self, entry: beat.ScheduleEntry) -> beat.ScheduleEntry:
        if pending_role(self, entry) is not BeatRole.LEADER:
            return entry  # a standby advances nothing: the leader's runs are the truth
        new_entry = next(entry)
        if self._claim(new_entry):
            self._zk_claimed.add(entry.name)
            self._zk_entries[entry.name] = new_entry
            return new_entry
        return entry

    def _claim(self, entry: beat.ScheduleEntry) -> bool:
        """Record this run before sending it; False when another beat recorded it first."""
        store = self._zk_store
        path = f"{store.runs_path}/{entry.name}"
        node = self._zk_cache.get(path)
        run = LastRun(entry.last_run_at.timestamp(), entry.total_run_count)
        data = run.to_bytes()
        client = store.client
        # The version of the last run: the cache's, or our own write's when the cache
        # has not shown it yet (a run recorded a moment ago).
        recorded = self._zk_recorded.get(entry.name)
        known = recorded[1] if recorded is not None else -1
        version = max(node.stat.version, known) if node is not None else known
        try:
            if version < 0:
                written = client.create(path, data, parents=True, retry=False).stat
            else:
                written = client.set(path, data, version=version)
        except (NodeExistsError, BadVersionError, NoNodeError, ZkRecipesError) as exc:
            # Refused, or no reply: a lost reply may hide our own write (and a resent one
            # meets it as NodeExists or BadVersion). The node says whose run it is.
            found = self._read_back(path, data)
            if found is None:
                refused = isinstance(exc, (NodeExistsError, BadVersionError, NoNodeError))
                if refused:
                    self._lost_race(entry.name)
                else:
                    log.warning(
                        "beat: %s not sent: its run could not be recorded (%s), nor read back",
                        entry.name,
                        exc,
                    )
                return False
            written = found
            log.info("beat: %s: the reply to its run record was lost; it was ours", entry.name)
        self._zk_recorded[entry.name] = (run, written.version)
        return True

    def _read_back(self, path: str, data: bytes) -> ZnodeStat | None:
        """The stat of ``path`` if it holds exactly ``data`` (our write), else None.

        The record is persistent: it tells across a lost session too, so the read
        is tried again on a new connection or session, for ``RECORD_READ_TIMEOUT``.
        """
        client = self._zk_store.client
        deadline = time.monotonic() + RECORD_READ_TIMEOUT
        while True:
            try:
                found, stat = client.get(path)
            except NoNodeError:
                return None
            except (ConnectionLostError, ZkTimeoutError, SessionLost):
                left = deadline - time.monotonic()
                if left <= 0 or not client.wait_connected(left):
                    return None
                continue
            except ZkRecipesError:
                return None
            return stat if found == data else None

    def _lost_race(self, name: str) -> None:
        recorded = self._zk_recorded.get(name)
        if recorded is not None:  # the cache's version from now on
            self._zk_recorded[name] = (recorded[0], -1)
        log.info("beat: %s was recorded by another beat first: not sent here", name)
        self._zk_changed.set()

    def apply_entry(self, entry: beat.ScheduleEntry, producer: Any = None) -> Any:
        # Reached through LeaderGate.apply_entry, which sends nothing from a standby.
        if entry.name not in self._zk_claimed:
            return None  # another beat recorded this run: it sends it
        self._zk_claimed.discard(entry.name)
        return super().apply_entry(entry, producer)

    def sync(self) -> None:
        """Nothing to save: runs are written as they happen."""

    def close(self) -> None:
        cache = getattr(self, "_zk_cache", None)
        if cache is not None:
            cache.close()
        super().close()

    @property
    def info(self) -> str:
        config = app_state(self.app).config  # the banner asks before set-up (lazy)
        return f"    . schedule -> zookeeper {schedule_path(config.prefix, config.beat_name)}"
