"""ACLs, typed, without kazoo in the signature.

ZooKeeper ACLs are (permissions, scheme, id) triples. Recipes create nodes
with the client's ``default_acl`` unless told otherwise; creator-only ACLs
(``CREATOR_ALL_ACL``) need an authenticated client (digest or SASL).
"""

from __future__ import annotations

import base64
import enum
import hashlib
from typing import NamedTuple


class Perms(enum.IntFlag):
    """ZooKeeper permission bits."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class Acl(NamedTuple):
    """One ACL entry: ``Acl(Perms.ALL, "world", "anyone")``."""

    perms: Perms
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[Acl, ...] = (Acl(Perms.ALL, "world", "anyone"),)
CREATOR_ALL_ACL: tuple[Acl, ...] = (Acl(Perms.ALL, "auth", ""),)
READ_ACL_UNSAFE: tuple[Acl, ...] = (Acl(Perms.READ, "world", "anyone"),)


def digest_acl(username: str, password: str, perms: Perms = Perms.ALL) -> Acl:
    """An ACL entry for the digest user ``username`` (as ``addauth digest user:pass``)."""
    digest = base64.b64encode(hashlib.sha1(f"{username}:{password}".encode()).digest()).decode()
    return Acl(perms, "digest", f"{username}:{digest}")
