"""Interop tests: Curator 5.4 (a JVM peer, ``CuratorPeer.java``) on the same znodes as ours.

A package so that its modules import as ``interop.*`` (no clash between this
``conftest`` and the one in ``tests/``) and tests can share ``.curator``.
"""
