"""The chaos run, one package shared by the short test and the long benchmark.

``tests/chaos/test_chaos_short.py`` imports it relatively (``tests`` is a
package); ``benchmarks/chaos.py`` puts the repository root on ``sys.path``
and imports ``tests.chaos.chaosrun``. Spawned workers inherit that path, so
they import ``tests.chaos.chaosrun.worker`` the same way. See docs/chaos.md.

- ``config``: the families, the fault kinds and the one frozen configuration;
- ``run``: the parent (workers, proxies, churn, the queues' drain, orphans, the report);
- ``faults``: the seeded schedule, whom a fault hits, and the faults;
- ``churn``: watch churn (the parent's writer, the workers' watches);
- ``worker``: one worker process;
- ``queues``: the queue family (producers and consumers; the parent's end of it);
- ``discovery``: the discovery family (the workers' instances; the parent's observer);
- ``store``: the fenced stores and the history file; ``history``: its rows;
- ``check``: the checker that turns the history into figures, with
  ``check_queues`` and ``check_discovery`` for those families.
"""
