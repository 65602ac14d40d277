"""What a chaos run does: the families, the fault kinds and the one frozen configuration."""

from __future__ import annotations

import dataclasses

#: The faults the history records, one row each (``faults`` in the checker's figures).
#: Worker faults: ``kill_worker`` (SIGKILL, then a replacement), ``pause_worker``
#: (SIGSTOP, then SIGCONT), and three partitions of the worker's proxies:
#: ``partition_worker`` (both ways), ``drop_requests_worker`` (the worker hears the
#: ensemble, the ensemble does not hear it) and ``drop_replies_worker`` (the other way).
#: ``blocked_log_worker``: the worker's log shipper stalls (its WARNING stream blocks),
#: then the worker is cut off both ways.
#: Server faults: ``restart_server`` (graceful), ``kill_leader`` (SIGKILL of the
#: ensemble's leader, started again a moment later) and ``isolate_follower`` (a
#: follower cut from the other members while its clients still reach it: it keeps
#: answering them for ``syncLimit * tickTime``; needs ``quorum_proxies=True``).
FAULT_KINDS = (
    "kill_worker",
    "pause_worker",
    "partition_worker",
    "drop_requests_worker",
    "drop_replies_worker",
    "blocked_log_worker",
    "restart_server",
    "kill_leader",
    "isolate_follower",
)

#: Partition kinds and the proxy verb each applies to the worker's proxies.
PARTITIONS = {
    "partition_worker": "blackhole",
    "drop_requests_worker": "drop_requests",
    "drop_replies_worker": "drop_replies",
    "blocked_log_worker": "blackhole",
}

#: Overlapping faults: a worker outage with a server fault inside it. Each one
#: records the two faults it is made of (so the history holds only FAULT_KINDS rows).
#: ``partition_with_kill_leader``: one of the three partitions, drawn, while the
#: ensemble's leader is killed and restarted; ``pause_with_restart_server``: a
#: SIGSTOP while a member restarts.
OVERLAP_KINDS = ("partition_with_kill_leader", "pause_with_restart_server")

SCHEDULE_KINDS = FAULT_KINDS + OVERLAP_KINDS

#: What the workers do under the faults, each with its own figures. ``locks``: the
#: fenced locks and the latch; ``queues``: producers and lock-safe consumers of two
#: DistributedQueues (``queues.py``); ``discovery``: instances registered, updated,
#: flapped and closed, watched by the parent (``discovery.py``).
FAMILIES = ("locks", "queues", "discovery")


@dataclasses.dataclass(frozen=True)
class ChaosConfig:
    #: Seconds of load (the schedule still applies every fault kind once, even if longer).
    duration: float = 25.0
    workers: int = 8
    seed: int = 0
    lock_paths: tuple[str, ...] = ("/locks/a", "/locks/b", "/locks/c")
    latch_path: str = "/leader"
    session_timeout: float = 2.5
    #: Upper bound of the random "work" inside a critical section, before the write ...
    hold_max: float = 0.005
    #: ... except on the first lock path, the slow one, where holders stay long enough
    #: for faults to find them (uniform in this range, seconds). Past the session
    #: timeout for a good share of them: a holder partitioned as it takes the lock
    #: is then still inside its section when the server expires its session and
    #: hands the lock on, which is when a late LOST shows.
    slow_hold: tuple[float, float] = (0.5, 4.5)
    #: Each worker takes the slow path once every so many seconds (uniform), so that its
    #: queue stays short (8 workers: held most of the time, often with a successor
    #: waiting, who takes over when a partitioned holder's session expires).
    slow_every: tuple[float, float] = (16.0, 32.0)
    acquire_timeout: float = 5.0
    #: Pause between two faults, seconds (uniform).
    fault_gap: tuple[float, float] = (0.5, 2.0)
    #: What the schedule draws from: FAULT_KINDS and OVERLAP_KINDS.
    kinds: tuple[str, ...] = SCHEDULE_KINDS
    #: Watch churn: nodes every worker keeps a data watch on, rewritten by the parent
    #: in turn, one every ``churn_every`` x the session timeout. A worker that hears
    #: the ensemble but cannot answer it (drop_requests) cannot re-arm its one-shot
    #: watches, so it gets one notification per node at most: the nodes times the
    #: interval (16 x 0.5 s) must outlast the longest outage (5 s) for notifications
    #: to keep coming until the server expires the session.
    churn_nodes: int = 16
    churn_every: float = 0.2
    #: Load that runs on after the last fault, so its aftermath is in the history.
    settle: float = 3.0
    quorum_timeout: float = 90.0
    #: What the workers run (FAMILIES): every worker runs each family chosen, on its one
    #: client, so every fault hits all of them at once.
    families: tuple[str, ...] = FAMILIES
    #: Queues: the fast one (items of 0-5 ms, single puts and put_multi nodes, poison
    #: items among them) and the slow one (0.5-4.5 s per item: faults find consumers
    #: mid-item, and the parent aims at them). Claims under ``<path>-claims``.
    queue_paths: tuple[str, str] = ("/queues/fast", "/queues/slow")
    #: Where consumers write ``<results>/<item id>`` (with their delivery's id) in the
    #: transaction that deletes the item: the item's fenced write inside ZooKeeper.
    results_path: str = "/queues/results"
    #: Seconds between two puts of one worker into the fast queue, and into the slow one.
    put_every: tuple[float, float] = (0.25, 0.75)
    slow_put_every: tuple[float, float] = (2.0, 6.0)
    #: Share of the fast queue's single puts that are poison (their consumer always raises:
    #: each must end as one dead letter after ``max_attempts``).
    poison: float = 0.03
    max_attempts: int = 3
    retry_backoff: float = 0.05
    #: Once the faults end, producers stop and the queues are given this long to empty.
    drain_timeout: float = 60.0
    #: Discovery: the service the workers register in, under ``services_path``; each
    #: worker keeps ``dynamic_instances`` DYNAMIC instances and one DYNAMIC_SEQUENTIAL
    #: one, and changes something every ``discovery_every`` seconds (uniform).
    services_path: str = "/services"
    service: str = "svc"
    dynamic_instances: int = 2
    discovery_every: tuple[float, float] = (0.3, 1.5)
    #: How often the parent's observer lists the service (sync, list, a stat per node).
    observe_every: float = 0.2

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(SCHEDULE_KINDS)
        if not self.kinds:
            raise ValueError(f"no fault kinds; known: {SCHEDULE_KINDS}")
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {SCHEDULE_KINDS}")
        strange = set(self.families) - set(FAMILIES)
        if not self.families or strange:
            raise ValueError(f"families must be some of {FAMILIES}, got {self.families}")

    @property
    def outage(self) -> float:
        """How long a pause or a partition lasts at least: well past the session timeout."""
        return self.session_timeout * 1.6

    @property
    def churn_interval(self) -> float:
        """Seconds between two churn writes: short enough that a worker that still
        hears the ensemble gets a notification far more often than its simulated
        expiry limit (66% of the session timeout)."""
        return self.churn_every * self.session_timeout

    @property
    def churn_paths(self) -> tuple[str, ...]:
        return tuple(f"/churn/n{index:02d}" for index in range(self.churn_nodes))

    @property
    def ghost_bound(self) -> float:
        """How long a node may outlive the end its holder gave it (unregister, close, kill).

        A client gives a session up at most 66% of its timeout after the server last
        proved it heard it (simulated expiry), and until then it may keep the session
        alive on the server (a reconnect with its id counts as heard); the server then
        expires it after the timeout, to the next tick (0.2 s) and a tick later deletes
        its nodes. So: 1.66 session timeouts and two ticks.
        """
        return self.session_timeout * 1.66 + 0.4


def claims_path(queue_path: str) -> str:
    """Where the consumers of ``queue_path`` claim its items (the queue's ``lock_path``)."""
    return queue_path + "-claims"
