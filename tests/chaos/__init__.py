"""The chaos run: its engine (package ``chaosrun``, driven by the benchmark too) and tests."""
