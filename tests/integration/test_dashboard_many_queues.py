"""The dashboard with 200 queues in Debian's chromium (issue 24): a table that pages,
sorts and filters on the server, numbers with separators, chart axes, and the
delete-one-item and move-one-item actions behind the admin token. The component
runs as operators run it, on a real Prosody; the browser fixtures are those of
test_dashboard_browser.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue_helpers import create_queue, publish
from tests.integration.test_dashboard_browser import (  # noqa: F401  (the browser fixture)
    TOKEN,
    browser,
    off_loop,
    screenshot,
    wait_for,
)
from tests.kit.integration import ClientFactory, ComponentFactory

pytestmark = pytest.mark.integration

QUEUES = 200


def rows(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        str(tr.get_attribute("data-node"))
        for tr in driver.find_elements(By.CSS_SELECTOR, "#queues tbody tr[data-node]")
    ]


def text_of(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)


async def test_two_hundred_queues_page_sort_and_filter(
    browser: Any,  # noqa: F811
    component: ComponentFactory,
    client: ClientFactory,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    proc = await component(
        http={"listen": "127.0.0.1:0", "admin_token": TOKEN},
        limits={"max_nodes_per_jid": 0},
    )
    pub = await client("pub")
    names = [f"q{n:03d}" for n in range(QUEUES)]
    for chunk in range(0, QUEUES, 20):
        await asyncio.gather(*(create_queue(pub, name) for name in names[chunk : chunk + 20]))
    # A backlog that grows with the queue's number on a few queues: the sort's truth.
    backlog = {"q007": 3, "q150": 12, "q199": 5}
    for node, count in backlog.items():
        for n in range(count):
            await publish(pub, node, f"{node}-item-{n}", text=f"payload of {node} {n}")

    await off_loop(browser.get, proc.http_base() + "/")
    await off_loop(wait_for, browser, lambda d: len(rows(d)) == 50, "the first page of 50")
    assert await off_loop(rows, browser) == names[:50]
    assert await off_loop(text_of, browser, "range") == "1-50 of 200"
    height = await off_loop(browser.execute_script, "return document.body.scrollHeight")
    assert height < 3000, f"one page of 50 queues is {height} px high"
    screenshot(browser, tmp_path, "dashboard-200-queues.png")

    # Paging: the next page, then 200 per page.
    await off_loop((await off_loop(browser.find_element, By.ID, "next")).click)
    await off_loop(wait_for, browser, lambda d: rows(d)[:1] == ["q050"], "page 2")
    assert await off_loop(text_of, browser, "range") == "51-100 of 200"

    # Sorting: by waiting, largest first (one click), then smallest first (another).
    waiting = await off_loop(browser.find_element, By.CSS_SELECTOR, 'th[data-sort="waiting"]')
    await off_loop(waiting.click)
    await off_loop(
        wait_for, browser, lambda d: rows(d)[:3] == ["q150", "q199", "q007"], "largest first"
    )
    assert await off_loop(text_of, browser, "range") == "1-50 of 200"  # back to page 1
    assert waiting.get_attribute("aria-sort") == "descending"
    await off_loop(waiting.click)
    await off_loop(
        wait_for, browser, lambda d: "q150" not in rows(d) and len(rows(d)) == 50, "smallest first"
    )

    # Filtering: a substring of the name, on all 200 (not the page shown).
    box = await off_loop(browser.find_element, By.ID, "filter")
    await off_loop(box.send_keys, "q19")
    await off_loop(wait_for, browser, lambda d: len(rows(d)) == 10, "the ten q19x queues")
    assert sorted(await off_loop(rows, browser)) == [f"q19{n}" for n in range(10)]
    assert await off_loop(text_of, browser, "range") == "1-10 of 10 (filtered from 200)"


async def test_items_with_payload_deleted_and_moved_one_by_one(
    browser: Any,  # noqa: F811
    component: ComponentFactory,
    client: ClientFactory,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    proc = await component(http={"listen": "127.0.0.1:0", "admin_token": TOKEN})
    pub = await client("pub")
    jobs = await create_queue(pub, "jobs")
    parked = await create_queue(pub, "parked")
    for n in range(1, 4):
        await publish(pub, jobs, f"job-{n}", text=f"hello {n}")
    for n in range(1234):  # a backlog with a thousands separator
        await publish(pub, parked, f"p-{n}")

    await off_loop(browser.get, f"{proc.http_base()}/queue?node={jobs}")
    item_row = 'tr.item[data-item="{}"]'
    await off_loop(
        wait_for,
        browser,
        lambda d: "hello 2" in d.find_element(By.CSS_SELECTOR, item_row.format("job-2")).text,
        "job-2 with its payload",
    )
    axes = await off_loop(browser.find_elements, By.CSS_SELECTOR, "#chart .axes [data-axis]")
    assert len(axes) == 2  # the rate chart has a y and an x axis
    assert "now" in axes[1].text and "/s" in axes[0].text
    assert await off_loop(browser.find_elements, By.CSS_SELECTOR, "button.delete-item") == []

    token_box = await off_loop(browser.find_element, By.ID, "token")
    await off_loop(token_box.send_keys, TOKEN + "\n")
    delete = await off_loop(
        wait_for,
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, item_row.format("job-1") + " button.delete-item"),
        "the delete button of job-1",
    )
    await off_loop(delete.click)
    await off_loop(lambda: browser.switch_to.alert.accept())
    await off_loop(
        wait_for,
        browser,
        lambda d: not d.find_elements(By.CSS_SELECTOR, item_row.format("job-1")),
        "job-1 to be gone",
    )
    assert "deleted item 'job-1'" in await off_loop(text_of, browser, "message")

    move = await off_loop(
        browser.find_element, By.CSS_SELECTOR, item_row.format("job-2") + " button.move-item"
    )
    await off_loop(move.click)

    def answer_prompt() -> None:
        alert = browser.switch_to.alert
        alert.send_keys(parked)
        alert.accept()

    await off_loop(answer_prompt)
    await off_loop(
        wait_for,
        browser,
        lambda d: not d.find_elements(By.CSS_SELECTOR, item_row.format("job-2")),
        "job-2 to leave jobs",
    )
    assert f"moved item 'job-2' to {parked}" in await off_loop(text_of, browser, "message")
    assert await off_loop(browser.find_elements, By.CSS_SELECTOR, item_row.format("job-3"))

    # On the overview, the moved item counts in 'parked', with a separator.
    await off_loop(browser.get, proc.http_base() + "/")
    cell = f'#queues tr[data-node="{parked}"] td.waiting'
    await off_loop(
        wait_for,
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, cell).text == "1,235",
        "1,235 waiting in parked",
    )
