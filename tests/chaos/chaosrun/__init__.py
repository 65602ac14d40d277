"""The chaos run, one package shared by the short test and the long benchmark.

``tests/chaos/test_chaos_short.py`` imports it from beside itself (pytest puts
``tests/chaos`` on ``sys.path``); ``benchmarks/chaos.py`` puts the same
directory on ``sys.path`` first. Spawned workers inherit that path, so they
import ``chaosrun.worker`` the same way. See docs/chaos.md.

- ``run``: the parent (workers, proxies, the fault schedule, orphans);
- ``worker``: one worker process;
- ``store``: the fenced store and the history file;
- ``check``: the checker that turns the history into figures.
"""
