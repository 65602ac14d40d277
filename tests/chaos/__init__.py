"""The chaos run: its engine (``_chaos*.py``, also driven by ``benchmarks/chaos.py``) and tests."""
