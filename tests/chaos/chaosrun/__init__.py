"""The chaos run, one package shared by the short test and the long benchmark.

``tests/chaos/test_chaos_short.py`` imports it relatively (``tests`` is a
package); ``benchmarks/chaos.py`` puts the repository root on ``sys.path``
and imports ``tests.chaos.chaosrun``. Spawned workers inherit that path, so
they import ``tests.chaos.chaosrun.worker`` the same way. See docs/chaos.md.

- ``config``: the fault kinds and the one frozen configuration;
- ``run``: the parent (workers, proxies, churn, orphans, the report);
- ``faults``: the seeded schedule, whom a fault hits, and the faults;
- ``churn``: watch churn (the parent's writer, the workers' watches);
- ``worker``: one worker process;
- ``store``: the fenced store and the history file;
- ``check``: the checker that turns the history into figures.
"""
