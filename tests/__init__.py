"""zk-recipes' tests: a package, so every module imports as ``tests.<...>``.

Helpers shared inside a folder are imported relatively (``from ._common import
...``), the one import style of the tree. ``integrations/<framework>/`` holds
each framework's tests and is skipped where the framework is not installed; the
rest is the core suite, which needs no framework (scripts/test.sh runs it in a
venv without any).
"""
