"""Interop tests: Curator 5.4 (a JVM peer, ``CuratorPeer.java``) on the same znodes as ours.

Its modules share the peer through ``.curator``.
"""
