"""``zk-recipes ensemble``: every server's role, mode and config version; 69 without a quorum.

Against an ensemble with dynamic reconfiguration (its own config followed,
an observer among the members) and against the shared standalone server (the
configured hosts, not followed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tests.processes import CliRun
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.frameworks import probe_server
from zk_recipes.testing import ZooKeeperCluster, ZooKeeperServer, free_ports


def _run(args: Sequence[str], env: dict[str, str], timeout: float = 30.0) -> tuple[int, str, str]:
    return CliRun(args, env).wait(timeout)


def test_the_ensemble_as_its_config_names_it_and_69_without_a_quorum(
    cli_env: dict[str, str],
) -> None:
    with ZooKeeperCluster(3, reconfig=True) as cluster:
        observer = cluster.add_server(observer=True)
        first = cluster.servers[0]
        env = dict(cli_env, ZK_RECIPES_HOSTS=first.connect_string)  # one server given
        code, out, err = _run(["ensemble", "--json"], env)
        assert code == 0, err
        report = json.loads(out)
        assert report["followed"] is True
        assert report["quorum"] is True
        assert report["problem"] is None
        rows = {s["address"]: s for s in report["servers"]}
        assert set(rows) == {m.connect_string for m in cluster.servers}  # learned, all four
        assert rows[observer.connect_string]["role"] == "observer"
        assert rows[observer.connect_string]["mode"] == "observer"
        assert sorted(s["mode"] for s in rows.values()) == [
            "follower",
            "follower",
            "leader",
            "observer",
        ]
        assert {s["config_version"] for s in rows.values()} == {report["config_version"]}
        assert [s["address"] for s in rows.values() if s["this_process"]] == [first.connect_string]
        code, out, _ = _run(["ensemble"], env)
        assert code == 0
        assert "(followed)" in out
        assert "<- this process" in out
        assert "observer" in out

        # Two of three voters stopped: the third (and the observer) answer, no quorum.
        cluster.servers[1].stop()
        cluster.servers[2].stop()
        code, out, _ = _run(["ensemble", "--json"], dict(env, ZK_RECIPES_CONNECTION_TIMEOUT="2"))
        assert code == ExitCode.UNAVAILABLE, out


def test_reconfig_adds_and_removes_and_refuses_a_change_without_a_quorum(
    cli_env: dict[str, str],
) -> None:
    with ZooKeeperCluster(3, reconfig=True) as cluster:
        one, two, three = cluster.servers
        env = dict(cli_env, ZK_RECIPES_HOSTS=cluster.connect_string)
        joining = cluster.start_joining()
        code, out, err = _run(["ensemble", "reconfig", "--add", joining.server_line], env)
        assert code == 0, err
        assert joining.connect_string in out
        code, out, _ = _run(["ensemble", "--json"], env)
        assert joining.connect_string in {s["address"] for s in json.loads(out)["servers"]}

        # Bad input: refused before anything is sent, with what is wrong.
        for args, says in (
            (["--add", "server.9=nowhere"], "--add"),
            (["--add", joining.server_line], "a member already"),
            (["--remove", "99"], "no server with id 99"),
        ):
            code, _, err = _run(["ensemble", "reconfig", *args], env)
            assert code == ExitCode.CONFIG, err
            assert says in err
        code, _, err = _run(["ensemble", "reconfig"], env)
        assert code == ExitCode.USAGE

        # One voter of four down: removing two serving ones would leave 1 of 2 serving.
        three.stop()
        args = ["ensemble", "reconfig", "--remove", str(one.myid), "--remove", str(two.myid)]
        code, _, err = _run(args, env)
        assert code == ExitCode.CONFIG
        assert "1 of 2 voting servers would serve: no quorum" in err
        # Removing the one that is down leaves three of three serving: made.
        code, out, err = _run(["ensemble", "reconfig", "--remove", str(three.myid)], env)
        assert code == 0, err
        assert three.connect_string not in out


def test_a_server_without_dynamic_config_shows_the_configured_hosts(
    cli_env: dict[str, str],
) -> None:
    code, out, err = _run(["ensemble", "--json"], cli_env)
    assert code == 0, err
    report = json.loads(out)
    assert report["followed"] is False
    assert report["config_version"] is None
    [server] = report["servers"]
    assert server["address"] == cli_env["ZK_RECIPES_HOSTS"]
    assert server["mode"] in ("leader", "standalone")
    assert server["this_process"] is True
    code, _, err = _run(["ensemble", "reconfig", "--remove", "1"], cli_env)
    assert code == ExitCode.CONFIG
    assert "no dynamic config" in err


def test_a_server_the_words_do_not_reach_is_asked_through_its_admin_server(
    cli_env: dict[str, str],
) -> None:
    with ZooKeeperServer(
        admin_server=True, extra_config={"4lw.commands.whitelist": "ruok"}
    ) as server:
        assert server.admin_port is not None
        # conf refused (srvr is always allowed from 3.5 on): the row says what is not known.
        env = dict(cli_env, ZK_RECIPES_HOSTS=server.connect_string)
        code, out, err = _run(["ensemble", "--json"], env)
        assert code == 0, err
        [row] = json.loads(out)["servers"]
        assert (row["source"], row["mode"]) == ("4lw", "leader")
        assert "config_version" not in row
        assert "refuses conf" in row["note"]

        # Nothing answers on a server's client port (TLS only, a firewall): its AdminServer.
        closed = free_ports(1)[0]
        row = probe_server(server.host, closed, admin_port=server.admin_port)
        assert row["source"] == "admin"
        assert row["address"] == f"{server.host}:{closed}"
        assert row["mode"] == "leader"  # a quorum of one
        assert row["zxid"].startswith("0x")
        assert row["connections"] >= 0
        assert len(row["latency_ms"].split("/")) == 3
        assert "config_version" not in row  # the AdminServer does not tell it
        row = probe_server(server.host, closed, admin_port=closed)
        assert row["refused"] is True
        assert "no AdminServer at" in row["error"]

        # --admin-port, one for all or one per server, reaches ensemble_report.
        per_server = f"{server.connect_string}={server.admin_port}"
        for given in (str(server.admin_port), per_server):
            code, out, err = _run(["ensemble", "--json", "--admin-port", given], env)
            assert code == 0, err
        # Bad input: a usage error that says what to give.
        for bad in ("http", "70000", "127.0.0.1=8080"):
            code, _, err = _run(["ensemble", "--admin-port", bad], env)
            assert code == 2, err
            assert "TCP port" in err or "HOST:CLIENT_PORT=ADMIN_PORT" in err
