"""The one place that talks to kazoo: a typed adapter around a KazooClient.

kazoo is untyped and its private connection internals are what we need to
reach, so every ``Any`` and every reach into kazoo stops in this package
(kazoo is pinned to 2.11.x in pyproject for that reason).

What it adds to kazoo:

- CONTAINER and TTL creates (opcodes 19 and 21, flags 4/5/6), which kazoo
  2.11 cannot send. Both answer with a Create2Response (path + stat).
- **Proof that the quorum heard us**, for the client's simulated expiry
  (_client/session.py). ``last_heard`` is the *send* time of the newest
  request whose reply proves the ensemble's leader handled it: a write or a
  sync, which a follower must forward to the leader (and a resumed session's
  handshake, which the leader revalidates). The leader received such a
  request no earlier than we sent it, from a follower that was in touch with
  it, so it heard of our session since then. Nothing else moves it: not a
  read or a ping, which a follower answers alone (a follower cut off from the
  quorum keeps answering them for ``syncLimit * tickTime`` while the leader
  expires our session), not a watch notification (under a one-way partition
  it keeps arriving while the server stops hearing us), not an auth packet.
  ``prove()`` sends a sync when nothing has proved the session lately (the
  session watchdog asks for it). The send time of each such request is kept
  by xid, from ``_submit`` until its reply's header is read.
- The negotiated session timeout, read from the handshake's reply (kazoo
  keeps only derived timeouts, and tells CONNECTED before it returns them).
- ``abandon_session()`` / ``expire_now()``: make kazoo build a brand-new
  session instead of resuming the old one, for simulated expiry.
- Error translation: kazoo exceptions become zk_recipes errors, with
  messages from one table.
- **The lean request path** (docs/request-path.md): the hooks that put
  poll_select, socket_io and direct_send on kazoo's connection, and the
  internal wake-ups that skip kazoo's watch worker (``mark_inline``). Those
  three modules hold the logic and never import kazoo; this package only wires
  them to kazoo's internals (``hooks``).

The package's modules, along its seams: ``connection`` (KazooConnection: the
kazoo client's lifecycle and bookkeeping), ``requests`` (the typed requests
and the one door they go out by), ``watch_ops`` (persistent watches, the
catch-up after a reconnect, one-shot watches taken back), ``hooks`` (every
reach into kazoo's private attributes, listed in one place: what a kazoo
upgrade must re-check),
``records`` (wire records and their conversions), ``failures`` (kazoo's
exceptions as ours), ``pending`` (a typed request in flight) and ``attempts``
(kazoo's logger, remembering why a connection attempt failed). Nothing outside
this package imports kazoo, except the test harness, which drives raw kazoo
clients on purpose.
"""

from zk_recipes._client.kazoo.connection import KazooConnection, RawStateHook
from zk_recipes._client.kazoo.failures import not_connected, translate
from zk_recipes._client.kazoo.pending import Pending

__all__ = ["KazooConnection", "Pending", "RawStateHook", "not_connected", "translate"]
