"""The examples of docs/security.md, as the page shows them; the test suite runs them.

The digest example runs on any server (``main``, run by tests/test_recipe_pages.py);
the SASL and TLS ones need a server set up for them, which
tests/client/test_security.py starts before calling ``sasl`` and ``tls``.
"""

from __future__ import annotations

from _stand_ins import work

from zk_recipes import ZkClient


def main(hosts: str) -> None:
    digest(hosts)
    # The example's nodes carry the creator-only ACL: only the same user can remove them.
    with ZkClient(hosts, auth=[("digest", "app:secret")]) as admin:
        admin.delete("/billing", recursive=True)


def digest(hosts: str) -> None:
    # --8<-- [start:digest]
    # given: hosts (your ensemble), work (your work)
    from zk_recipes import CREATOR_ALL_ACL, Lock, ZkClient

    with ZkClient(
        hosts,  # "zk1:2181,zk2:2181,zk3:2181"
        namespace="billing",
        auth=[("digest", "app:secret")],
        default_acl=CREATOR_ALL_ACL,
    ) as zk:
        with Lock(zk, "/locks/nightly").acquired(timeout=30):
            work()
    # --8<-- [end:digest]


def sasl(hosts: str) -> None:
    # --8<-- [start:sasl]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181"), work (your work)
    from zk_recipes import Acl, Lock, Perms, ZkClient

    with ZkClient(
        hosts,
        sasl={"mechanism": "DIGEST-MD5", "username": "app", "password": "secret"},
        default_acl=[Acl(Perms.ALL, "sasl", "app")],
    ) as zk:
        with Lock(zk, "/locks/nightly").acquired(timeout=30):
            work()
    # --8<-- [end:sasl]


def tls(hosts: str, ca_file: str, cert_file: str, key_file: str) -> None:
    # --8<-- [start:tls]
    # given: hosts (the ensemble's secure port, "zk1.example.com:2281"), work (your work)
    # given: ca_file, cert_file, key_file (the paths of the PEM files below)
    from zk_recipes import Lock, TlsOptions, ZkClient

    options = TlsOptions(
        ca_file=ca_file,  # /etc/myapp/zk-ca.pem: the CA that signed the servers' certificates
        cert_file=cert_file,  # /etc/myapp/zk-client.pem: needed when ssl.clientAuth=need
        key_file=key_file,  # /etc/myapp/zk-client.key
        check_hostname=True,
    )
    with ZkClient(hosts, tls=options) as zk:
        with Lock(zk, "/locks/nightly").acquired(timeout=30):
            work()
    # --8<-- [end:tls]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("security (digest): ok")
