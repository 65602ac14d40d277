"""Tests of ``holders()`` (``zk_recipes/_inspect/``): who holds and who waits, from the znodes."""
