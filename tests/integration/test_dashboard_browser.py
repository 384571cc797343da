"""The dashboard in a real browser (issue 12): Debian's chromium, driven by Selenium
through Debian's chromium-driver (no browser download), against the component as
operators run it on a real Prosody, with real workers at work.

It loads the overview while a queue is busy and sees the numbers move, opens the
queue and sees a lock held by a worker, is refused an action without signing in,
signs in with the admin token, unlocks the item and sees it go to another worker
(in the page and in that worker's inbox).

Screenshots go to the test's directory; with ``XMPP_QUEUE_SCREENSHOTS=DIR`` they
are also copied there (``XMPP_QUEUE_SCREENSHOTS=docs`` refreshes the ones the
operations guide shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.integration.queue_helpers import (
    Inbox,
    QueueWorker,
    create_queue,
    match,
    publish,
    send_presence_to_service,
    subscribe_queue,
    wait_until,
)
from tests.kit.env import missing
from tests.kit.integration import ClientFactory, ComponentFactory

pytestmark = pytest.mark.integration

TOKEN = "browser-test-token-0123456789"
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
WAIT = 20.0
T = TypeVar("T")


def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if os.path.exists(p)), None)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed (pip install -e '.[test]')")
    binary, driver_path = _first(CHROMIUM), _first(CHROMEDRIVER)
    if binary is None or driver_path is None:
        missing("chromium and chromium-driver are not installed (apt; .ci/run installs them)")
    options = Options()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Selenium blocks: run it in a thread so the workers on this loop keep working."""
    return await asyncio.to_thread(fn, *args)


def wait_for(driver: Any, condition: Callable[[Any], T], what: str, within: float = WAIT) -> T:
    """Poll *condition* (a Selenium lookup) until it returns something truthy."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    deadline = time.monotonic() + within
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition(driver)
            if value:
                return value
        except (StaleElementReferenceException, WebDriverException) as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out after {within}s waiting for {what} ({last})")


def card_value(driver: Any, node: str, key: str) -> str:
    """The *key* cell of *node*'s row in the overview table."""
    from selenium.webdriver.common.by import By

    cell = driver.find_element(By.CSS_SELECTOR, f'#queues tr[data-node="{node}"] td.{key}')
    return str(cell.text)


def lock_holder(driver: Any, item: str) -> str | None:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f'#locks tr.lock[data-item="{item}"] td.holder')
    return str(rows[0].text) if rows else None


def screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    target = os.environ.get("XMPP_QUEUE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)
    return path


@contextlib.asynccontextmanager
async def publishing(client: Any, node: str, every: float) -> AsyncIterator[list[str]]:
    """Publish one item every *every* seconds until the block ends."""
    sent: list[str] = []

    async def loop() -> None:
        n = 0
        while True:
            n += 1
            sent.append(await publish(client, node, f"job-{n}"))
            await asyncio.sleep(every)

    task = asyncio.get_running_loop().create_task(loop())
    try:
        yield sent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_dashboard_in_chromium(
    browser: Any, component: ComponentFactory, client: ClientFactory, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    proc = await component(http={"listen": "127.0.0.1:0", "admin_token": TOKEN})
    base = proc.http_base()
    pub = await client("pub")
    orders = await create_queue(pub, "orders", queue_max_deliveries=5)
    emails = await create_queue(pub, "emails")
    for n in range(7):
        await publish(pub, emails, f"mail-{n}")  # a second queue, with a backlog

    # w1 takes the first order and sits on it (a stuck worker); w2 works steadily.
    stuck = await client("w1", resource="stuck")
    stuck_inbox = Inbox(stuck)
    await send_presence_to_service(stuck)
    await subscribe_queue(stuck, orders, 1)
    await publish(pub, orders, "order-1")
    await stuck_inbox.next(match("item", orders, "order-1"))
    steady = QueueWorker(await client("w2", resource="steady"), orders, 2, work_time=(0.8, 1.6))
    await steady.start()

    async with publishing(pub, orders, every=0.7):
        # --- the overview, live ---------------------------------------------------------
        await off_loop(browser.get, base + "/")
        await off_loop(
            wait_for, browser, lambda d: card_value(d, orders, "waiting"), "the orders card"
        )
        first = await off_loop(card_value, browser, orders, "acks")
        moved = await off_loop(
            wait_for,
            browser,
            lambda d: card_value(d, orders, "acks") != first,
            "the acks figure of 'orders' to move",
        )
        assert moved
        assert await off_loop(card_value, browser, emails, "waiting") == "7"
        await off_loop(
            wait_for,
            browser,
            lambda d: d.find_elements(
                By.CSS_SELECTOR, f'#queues tr[data-node="{orders}"] polyline'
            ),
            "the rate chart",
        )
        if os.environ.get("XMPP_QUEUE_SCREENSHOTS"):  # for the docs: a chart with a history
            await asyncio.sleep(20)
        screenshot(browser, tmp_path, "dashboard-overview.png")

        # --- one queue: the stuck worker's lock -----------------------------------------
        link = await off_loop(browser.find_element, By.LINK_TEXT, orders)
        await off_loop(link.click)
        holder = await off_loop(
            wait_for, browser, lambda d: lock_holder(d, "order-1"), "the lock of order-1"
        )
        assert holder == str(stuck.boundjid)
        subscribers = await off_loop(
            browser.find_elements, By.CSS_SELECTOR, "#subscribers tr.subscriber"
        )
        assert len(subscribers) == 2
        # Read-only until signed in: no unlock buttons.
        assert await off_loop(browser.find_elements, By.CSS_SELECTOR, "button.unlock") == []

        # A wrong token is refused and changes nothing.
        token_box = await off_loop(browser.find_element, By.ID, "token")
        await off_loop(token_box.send_keys, "not-the-token-at-all\n")
        await off_loop(
            wait_for,
            browser,
            lambda d: "refused" in d.find_element(By.ID, "error").text,
            "the refusal",
        )
        assert await off_loop(browser.find_elements, By.CSS_SELECTOR, "button.unlock") == []
        assert await off_loop(lock_holder, browser, "order-1") == str(stuck.boundjid)

    # The steady worker must have room, or order-1 goes back to the stuck worker (the
    # same one only when nobody else can take it): stop publishing, let it catch up.
    await wait_until(lambda: len(steady.held) < steady.limit, 60, "room at the steady worker")
    steady.frozen = True  # from now on it keeps what it gets, so the page can show it
    # --- sign in, unlock order-1, see it go to the steady worker -------------------
    token_box = await off_loop(browser.find_element, By.ID, "token")
    await off_loop(token_box.send_keys, TOKEN + "\n")
    button = await off_loop(
        wait_for,
        browser,
        lambda d: d.find_element(
            By.CSS_SELECTOR, '#locks tr.lock[data-item="order-1"] button.unlock'
        ),
        "the unlock button",
    )
    screenshot(browser, tmp_path, "dashboard-queue.png")
    await off_loop(button.click)
    await stuck_inbox.next(match("unlock", orders, "order-1"))
    await off_loop(
        wait_for,
        browser,
        lambda d: lock_holder(d, "order-1") == str(steady.client.boundjid),
        "order-1 to go to the steady worker",
    )
    assert steady.deliveries["order-1"] == 1
    message = await off_loop(browser.find_element, By.ID, "message")
    assert "unlocked item 'order-1'" in message.text
    steady.stop()


PUSH = {
    "allowed_hosts": ["127.0.0.1"],
    "allowed_networks": ["127.0.0.0/8"],
    "allow_http": True,
    "request_timeout": 5,
}
HMAC_SECRET = "browser-hmac-secret-5c1e"


def push_rows(driver: Any) -> list[dict[str, str]]:
    """The push table's rows as {id, url, auth, max} (none: the empty row)."""
    from selenium.webdriver.common.by import By

    rows = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "#push tbody tr.push"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        rows.append({"id": cells[0], "url": cells[1], "auth": cells[2], "max": cells[3]})
    return rows


def fill_push_form(driver: Any, url: str, auth: str, secret: str, most: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    box = driver.find_element(By.ID, "push-url")
    box.clear()
    box.send_keys(url)
    Select(driver.find_element(By.ID, "push-auth")).select_by_value(auth)
    if secret:
        driver.find_element(By.ID, "push-secret").send_keys(secret)
    count = driver.find_element(By.ID, "push-max")
    count.clear()
    count.send_keys(most)
    driver.find_element(By.CSS_SELECTOR, "#push-add button[type=submit]").click()


async def test_push_subscription_added_and_removed_in_chromium(
    browser: Any, component: ComponentFactory, client: ClientFactory, tmp_path: Path
) -> None:
    """Issue 22: an admin adds a push subscription from the queue page (a refused
    endpoint shows the [push] rule that refused it), sees it listed with its secret
    masked, the receiver gets a published item signed with that secret, and the
    Remove button ends it."""
    import hmac as hmac_module
    import json

    from selenium.webdriver.common.by import By

    from tests.kit.push import Receiver

    receiver = await Receiver().start()
    try:
        proc = await component(http={"listen": "127.0.0.1:0", "admin_token": TOKEN}, push=PUSH)
        pub = await client("pub")
        node = await create_queue(pub, "hooks", queue_retry_delay=0)
        await off_loop(browser.get, f"{proc.http_base()}/queue?node={node}")
        await off_loop(wait_for, browser, lambda d: d.find_element(By.ID, "token"), "sign-in")
        # Read-only until signed in: no form.
        assert not await off_loop(lambda: browser.find_element(By.ID, "push-add").is_displayed())
        token_box = await off_loop(browser.find_element, By.ID, "token")
        await off_loop(token_box.send_keys, TOKEN + "\n")
        await off_loop(
            wait_for,
            browser,
            lambda d: d.find_element(By.ID, "push-add").is_displayed(),
            "the push form",
        )

        # Refused by the [push] rules: the page names the rule; nothing is listed.
        await off_loop(fill_push_form, browser, "http://10.1.2.3/hook", "hmac", HMAC_SECRET, "2")
        refusal = await off_loop(
            wait_for,
            browser,
            lambda d: d.find_element(By.ID, "error").text,
            "the refusal",
        )
        assert "push-add refused" in refusal and "not in [push] allowed_hosts" in refusal
        assert await off_loop(push_rows, browser) == []

        await off_loop(fill_push_form, browser, receiver.url, "hmac", HMAC_SECRET, "2")
        [row] = await off_loop(wait_for, browser, push_rows, "the push subscription's row")
        assert row["url"] == receiver.url and row["auth"] == "hmac ****" and row["max"] == "2"
        message = await off_loop(browser.find_element, By.ID, "message")
        assert f"added push subscription {row['id']}" in message.text
        assert (
            await off_loop(browser.find_element(By.ID, "push-secret").get_attribute, "value") == ""
        )
        await off_loop(
            browser.execute_script,
            "document.getElementById('push').scrollIntoView({block: 'center'})",
        )
        screenshot(browser, tmp_path, "dashboard-push.png")

        # Published: the receiver gets the item, signed with the secret typed in.
        item = await publish(pub, node, "hello-push")
        await receiver.until(lambda seen: item in receiver.acked())
        raw = receiver.bodies[0]
        assert json.loads(raw)["id"] == item
        sent = dict(
            p.split("=", 1) for p in receiver.headers[0]["X-Xmpp-Queue-Signature"].split(",")
        )
        mac = hmac_module.new(HMAC_SECRET.encode(), sent["t"].encode() + b"." + raw, "sha256")
        assert sent["v1"] == mac.hexdigest()

        # Remove (after the confirmation), and it is gone from the page.
        button = await off_loop(
            browser.find_element, By.CSS_SELECTOR, f'#push tr.push[data-id="{row["id"]}"] button'
        )
        await off_loop(button.click)
        await off_loop(lambda: browser.switch_to.alert.accept())
        await off_loop(
            wait_for,
            browser,
            lambda d: "no push subscriptions" in d.find_element(By.ID, "push").text,
            "the push subscription to go",
        )
        message = await off_loop(browser.find_element, By.ID, "message")
        assert f"removed push subscription {row['id']}" in message.text
        source = await off_loop(lambda: browser.page_source)
        log = proc.log_path.read_text()
        assert HMAC_SECRET not in source and HMAC_SECRET not in log
        # Removed means no more POSTs: the next item waits in the queue, on the page.
        posts = len(receiver.seen)
        later = await publish(pub, node, "after-removal")
        state = f'#items tr.item[data-item="{later}"] td.state'
        await off_loop(
            wait_for,
            browser,
            lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, state) if e.text == "waiting"],
            "the next item waiting on the page",
        )
        assert len(receiver.seen) == posts
    finally:
        await receiver.stop()
