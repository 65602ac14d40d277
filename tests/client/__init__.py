"""Tests of the session layer (``zk_recipes/_client/``).

ZkClient, states, simulated expiry, the request path, security.
"""
