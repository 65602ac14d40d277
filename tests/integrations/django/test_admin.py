"""The admin's ZooKeeper page: who may see it, what it shows, and one real browser.

Every test holds a real lock in its own namespace and reads the page the
admin serves; the browser test logs in through the admin's login form with
Debian's chromium (``scripts/bootstrap.sh`` installs it). Set
``ZK_RECIPES_UPDATE_SCREENSHOTS=1`` to write its screenshot to
docs/img/django-admin-zookeeper.png as well.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

import zk_recipes
import zk_recipes_django
from tests.integrations.browser import headless_chromium
from zk_recipes import Lock, ZkClient
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import free_ports, wait_until

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "img" / "django-admin-zookeeper.png"
#: Owner data is arbitrary: this identifier must come out escaped.
IDENTIFIER = "nightly <b>report</b> & co"
PAGE = "admin:zk_recipes_status_changelist"
OWNER = f"{socket.gethostname()}:{os.getpid()}"


def report_path() -> str:
    return lock_path("report", zk_recipes_django.config().prefix)


@pytest.fixture
def held_lock(
    zk_settings: dict[str, Any], zk_client_factory: Callable[..., ZkClient]
) -> Iterator[Lock]:
    """The "report" lock of the test's namespace, held by a client of its own."""
    lock = Lock(zk_client_factory(), report_path(), identifier=IDENTIFIER)
    assert lock.acquire(timeout=10)
    yield lock
    if lock.is_held():
        lock.release()


@pytest.fixture
def staff_client(client: Client, django_user_model: Any) -> Client:
    """Logged in as active staff without a single permission (no superuser)."""
    user = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    client.force_login(user)
    return client


def test_anonymous_users_are_sent_to_the_admin_login(client: Client) -> None:
    response = client.get(reverse(PAGE))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login") + "?next=")


def test_users_who_are_not_staff_have_no_access(
    client: Client, django_user_model: Any, held_lock: Lock
) -> None:
    user = django_user_model.objects.create_user("customer", password="pw")
    client.force_login(user)
    response = client.get(reverse(PAGE))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert report_path() not in client.get(reverse(PAGE), follow=True).content.decode()


def test_staff_see_the_page_in_the_admin_index(staff_client: Client) -> None:
    index = staff_client.get(reverse("admin:index")).content.decode()
    assert "ZooKeeper" in index
    assert f'href="{reverse(PAGE)}"' in index
    assert reverse("admin:zk_recipes_status_add") not in index


def test_staff_see_the_holder_of_a_lock(staff_client: Client, held_lock: Lock) -> None:
    response = staff_client.get(reverse(PAGE))
    assert response.status_code == 200
    page = response.content.decode()
    assert f'data-path="{report_path()}"' in page
    assert OWNER in page
    assert escape(IDENTIFIER) in page
    assert IDENTIFIER not in page
    client = zk_recipes_django.get_client()
    assert f"0x{client.session_id:x}" in page  # the connection report of "default"
    # Every server of the ensemble as it answered (here the one shared server), this
    # process's marked: the table `zk-recipes ensemble` prints.
    table = page[page.index('<table class="zk-ensemble">') :]
    table = table[: table.index("</table>")]
    host, port = client.connected_address or ("?", 0)
    assert f"<td>{host}:{port}</td>" in table
    assert "<td>leader</td>" in table  # the harness's quorum of one
    assert "<td>&lt;- this process</td>" in table


def test_the_page_is_read_again_on_each_load(staff_client: Client, held_lock: Lock) -> None:
    assert OWNER in staff_client.get(reverse(PAGE)).content.decode()
    held_lock.release()
    page = staff_client.get(reverse(PAGE)).content.decode()
    assert OWNER not in page
    assert "No locks, semaphores or elections" in page


def test_nobody_may_add_change_or_delete(staff_client: Client, admin_client: Client) -> None:
    for user_client in (staff_client, admin_client):
        for name, args in (
            ("add", ()),
            ("change", ("1",)),
            ("delete", ("1",)),
            ("history", ("1",)),
        ):
            url = reverse(f"admin:zk_recipes_status_{name}", args=args)
            assert user_client.get(url).status_code == 403, url
            assert user_client.post(url, {"id": "1"}).status_code == 403, url


def test_an_unreachable_alias_renders_an_error(
    staff_client: Client, settings: Any, zk_settings: dict[str, Any], held_lock: Lock
) -> None:
    (closed,) = free_ports(1)
    settings.ZK_RECIPES = {
        "offline": {"HOSTS": f"127.0.0.1:{closed}", "CONNECTION_TIMEOUT": 1.0},
        "default": zk_settings,
        "broken": {"HOSTS": "127.0.0.1:2181", "SESSION_TIMEOUT": "soon"},
    }
    response = staff_client.get(reverse(PAGE))
    assert response.status_code == 200
    page = response.content.decode()
    default, offline = page.index('data-alias="default"'), page.index('data-alias="offline"')
    assert default < page.index('data-alias="broken"') < offline
    assert OWNER in page[default : page.index('data-alias="broken"')]
    assert f"127.0.0.1:{closed}" in page[offline:]
    assert 'class="zk-error"' in page[offline:]
    assert "not connected" in page[offline:]
    assert "SESSION_TIMEOUT" in page[page.index('data-alias="broken"') : offline]


def test_settings_that_cannot_be_read_render_an_error(staff_client: Client, settings: Any) -> None:
    settings.ZK_RECIPES = ["not", "a", "dict"]
    response = staff_client.get(reverse(PAGE))
    assert response.status_code == 200
    assert 'class="errornote"' in response.content.decode()


def test_the_app_ships_its_migration() -> None:
    call_command("makemigrations", check=True, dry_run=True, verbosity=0)


# -- a real browser ------------------------------------------------------------------------


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with headless_chromium(tmp_path) as driver:
        yield driver


@pytest.mark.browser
@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
def test_a_staff_user_reads_the_page_in_a_browser(
    browser: Any,
    live_server: Any,
    admin_user: Any,
    zk_settings: dict[str, Any],
    zk_client_factory: Callable[..., ZkClient],
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    # A holder, and a second contender queued behind it: the page shows the queue.
    holder = Lock(zk_client_factory(), report_path(), identifier="nightly-report")
    assert holder.acquire(timeout=10)
    waiter = Lock(zk_client_factory(), report_path(), identifier="nightly-report-retry")
    queued = threading.Thread(target=waiter.acquire, kwargs={"timeout": 90}, daemon=True)
    queued.start()
    observer = zk_client_factory()
    try:
        wait_until(
            lambda: any(r.waiting for r in zk_recipes.holders(observer, report_path())),
            "the second contender queued",
        )
        browser.get(live_server.url + reverse("admin:index"))
        browser.find_element(By.NAME, "username").send_keys(admin_user.username)
        browser.find_element(By.NAME, "password").send_keys("password")
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        browser.find_element(By.CSS_SELECTOR, f'a[href="{reverse(PAGE)}"]').click()

        recipe = browser.find_element(By.CSS_SELECTOR, "tbody.zk-recipe")
        assert recipe.get_attribute("data-path") == report_path()
        first = recipe.find_element(By.CSS_SELECTOR, "tr.zk-holder")
        assert first.find_element(By.CSS_SELECTOR, ".zk-owner").text == OWNER
        assert first.find_element(By.CSS_SELECTOR, ".zk-id").text == "nightly-report"
        second = recipe.find_element(By.CSS_SELECTOR, "tr.zk-waiting")
        assert second.find_element(By.CSS_SELECTOR, ".zk-id").text == "nightly-report-retry"

        shot = tmp_path / "django-admin-zookeeper.png"
        assert browser.save_screenshot(str(shot))
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert len(data) > 1000
        if os.environ.get("ZK_RECIPES_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            SCREENSHOT.write_bytes(data)
    finally:
        waiter.cancel()
        queued.join(30)
        holder.release()
