"""The Django integration end to end: run `python example_projects/django_site/django_demo.py`.

Starts a throwaway ZooKeeper and a fresh sqlite database, then:

1. a deploy: three pods run `manage.py zklock migrate -- migrate` at once;
   one migrates, the others wait and find nothing to do;
2. the site under runserver: three clicks on "send invoice 42" at once; one
   sends (200), the others get 423 Locked at once; the send records its
   fencing token;
3. cron on three hosts: `manage.py send_reminders --no-wait` (a command with
   its own lock): one sends, two exit 75; `zkstatus --json` names the holder;
4. the admin's ZooKeeper page, as a staff user sees it, listing a held lock;
5. the Celery app, configured from Django's settings: its singleton task locks
   under the namespace ZK_RECIPES names, with no Celery ZooKeeper setting.

In steps 2 and 3 the one that gets the lock keeps it until the demo has seen
the others refused: the demo gives that process ``DEMO_HOLD_UNTIL``, a file it
creates then (``invoices/demo_hold.py``), so no step depends on how fast the
machine is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from zk_recipes.testing import ZooKeeperServer

SITE = Path(__file__).resolve().parent
ROOT = SITE.parents[1]


def manage(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`manage.py ARGS` as another host would run it."""
    return subprocess.Popen(
        [sys.executable, str(SITE / "manage.py"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: {what} did not happen within {timeout:g}s")
        time.sleep(0.05)


def deploy(env: dict[str, str]) -> None:
    print("== 1. three pods run `manage.py zklock migrate -- migrate --noinput` at once")
    pods = [manage("zklock", "migrate", "--", "migrate", "--noinput", env=env) for _ in range(3)]
    for number, pod in enumerate(pods, 1):
        out, err = pod.communicate(timeout=120)
        if pod.returncode != 0:
            raise SystemExit(f"demo failed: pod {number} exited {pod.returncode}: {err}")
        what = "migrated" if "Applying invoices.0001_initial" in out else "nothing to migrate"
        print(f"   pod {number}: {what}")


def clicks(env: dict[str, str], scratch: Path) -> None:
    print("== 2. three clicks on 'send invoice 42' at once, under runserver")
    port = free_port()
    sent = scratch / "invoice-sent"  # the send that gets the lock holds it until this exists
    server_env = dict(env, DEMO_HOLD_UNTIL=str(sent))
    server = manage("runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks", env=server_env)
    try:
        wait_until(lambda: _listening(port), "runserver listening")
        url = f"http://127.0.0.1:{port}/invoices/42/send/"
        answers: list[tuple[int, str]] = []
        threads = [threading.Thread(target=lambda: answers.append(_post(url))) for _ in range(3)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(answers) == 2, "two clicks answered while the first sends")
        sent.touch()
        for thread in threads:
            thread.join(60)
        for status, body in sorted(answers):
            print(f"   {status}: {body}")
        status, body = _post(url)
        print(f"   a later click: {status}: {body}")
    finally:
        sent.touch()  # never leave a send waiting, whatever happened
        server.terminate()
        server.communicate(timeout=30)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _post(url: str) -> tuple[int, str]:
    try:
        request = urllib.request.Request(url, method="POST")
        with urllib.request.urlopen(request, timeout=90) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode().strip()


def cron(env: dict[str, str], scratch: Path) -> None:
    print("== 3. cron runs `manage.py send_reminders --no-wait` on three hosts")
    import zk_recipes_django

    client = zk_recipes_django.get_client()
    lock_dir = "/zk-recipes/locks/send-reminders"
    done = scratch / "reminders-sent"  # the first host holds the lock until this exists
    first = manage("send_reminders", "--no-wait", env=dict(env, DEMO_HOLD_UNTIL=str(done)))
    try:
        wait_until(lambda: client.exists(lock_dir) and client.get_children(lock_dir), "first holds")
        others = [manage("send_reminders", "--no-wait", env=env) for _ in range(2)]
        status = manage("zkstatus", "--json", env=env)
        report = json.loads(status.communicate(timeout=60)[0])["aliases"]["default"]
        (entry,) = [r for r in report["holders"] if r["path"] == lock_dir]
        holder = entry["holders"][0]
        print(f"   zkstatus: {lock_dir} held by pid {holder['pid']} ({holder['id']})")
        outs = {process.pid: process.communicate(timeout=60)[0] for process in others}
    finally:
        done.touch()  # the reminders are out: the first host may finish
    outs[first.pid] = first.communicate(timeout=60)[0]
    codes = []
    for process in (first, *others):
        codes.append(process.returncode)
        if outs[process.pid].strip():
            print(f"   pid {process.pid}: {outs[process.pid].strip()}")
    print(f"   exit codes {codes}; the holder was the first: {holder['pid'] == first.pid}")


def admin_page() -> None:
    print("== 4. the admin's ZooKeeper page, as a staff user sees it")
    from django.contrib.auth.models import User
    from django.test import Client

    import zk_recipes_django
    from zk_recipes import Lock
    from zk_recipes.frameworks import lock_path

    staff = User.objects.create_user("ops", password="demo", is_staff=True)
    browser = Client()
    browser.force_login(staff)
    lock = Lock(
        zk_recipes_django.get_client(), lock_path("nightly-export"), identifier="export job"
    )
    with lock:
        page = browser.get("/admin/zk_recipes/status/").content.decode()
    listed = lock_path("nightly-export") in page and "export job" in page
    print(f"   the page lists the held lock: {listed}")
    anonymous = Client().get("/admin/zk_recipes/status/")
    where = anonymous["Location"]
    print(f"   an anonymous visitor is sent to log in: {anonymous.status_code} -> {where}")


def celery_task() -> None:
    print("== 5. the Celery app, configured from Django's settings (no CELERY_ZK_RECIPES_*)")
    from invoices.tasks import sync_customer

    result = sync_customer.delay("acme").get()
    where, token = result["lock"].rsplit("/", 1)[0], result["fencing_token"]
    print(f"   sync_customer('acme') ran under {where}/<key> in namespace /shop, token {token}")


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch, ZooKeeperServer() as zookeeper:
        env = dict(
            os.environ,
            ZK_HOSTS=zookeeper.connect_string,
            SHOP_DB=str(Path(scratch) / "shop.sqlite3"),
            DJANGO_SETTINGS_MODULE="shop_site.settings",
            PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT), str(ROOT / "integrations")]),
            PYTHONUNBUFFERED="1",
        )
        os.environ.update(env)
        sys.path[:0] = [str(SITE)]
        deploy(env)

        import django

        django.setup()
        from invoices.models import Invoice

        Invoice.objects.create(pk=42, customer="acme")
        clicks(env, Path(scratch))
        invoice = Invoice.objects.get(pk=42)
        sent, token = invoice.sent_count, invoice.sent_token
        print(f"   invoice 42 was sent {sent} times, last under token {token}")
        cron(env, Path(scratch))
        admin_page()
        celery_task()
        import zk_recipes_celery
        import zk_recipes_django

        zk_recipes_django.close_all()
        zk_recipes_celery.close_clients()
    print("django demo finished")


if __name__ == "__main__":
    main()
