"""The inspector in a real headless Chromium, against a gateway that served real traffic."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from gateway.api.auth import hash_key
from tests.procs import GatewayHandle, run_gateway, run_simulator, sim_models

ADMIN_KEY = "vk-inspector-admin"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SESSION = "inspector-demo"
FILLER = (
    "The shipment {i} left the Rotterdam warehouse on 2026-03-{day:02d} with order id ORD-{i:05d}, "
    "carrying {n} pallets of ceramic tiles for the Lisbon showroom; the driver confirmed the route via A{i} "
    "and asked whether the customs form CF-{i} needs a second signature before the border. "
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    tmp = tmp_path_factory.mktemp("inspector")
    config = {
        "database_url": f"sqlite:///{tmp / 'inspector.db'}",
        "models": sim_models("http://placeholder/v1"),
        "auth": {"admin_keys": [hash_key(ADMIN_KEY)]},
        "policy": {"rules": {"rules": [{"text": "Never promise a delivery date.", "priority": 1}]}},
    }
    with run_simulator(tmp) as sim:
        config["models"] = sim_models(sim.base_url)
        with run_gateway(tmp, config) as gw:
            _traffic(gw)
            _wait_recorded(gw)
            yield gw


def _traffic(gw: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-user")
    messages = [
        {"role": "system", "content": "You are a logistics assistant. Current time: 2026-11-29T10:00:00Z"},
        {"role": "user", "content": "Track my shipments, please."},
    ]
    for i in range(1, 26):
        messages[0]["content"] = f"You are a logistics assistant. Current time: 2026-11-29T10:{i:02d}:00Z"
        reply = client.chat.completions.create(
            model="small-window", messages=messages, extra_headers={"X-Session-Id": SESSION}
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        messages.append({"role": "user", "content": FILLER.format(i=i, day=i % 28 + 1, n=i * 3) * 3})


def _wait_recorded(gw: GatewayHandle) -> None:
    deadline = time.monotonic() + 30
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    while time.monotonic() < deadline:
        page = httpx.get(f"{gw.url}/ui/sessions/{SESSION}", headers=headers)
        if page.status_code == 200 and page.text.count('class="turn-row') >= 25:
            return
        time.sleep(0.3)
    raise AssertionError("the store did not record the 25 turns in time")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: tests/run.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        launched.close()


def _shot(page: object, name: str) -> None:
    folder = os.environ.get("VENTANA_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)  # type: ignore[attr-defined]


def test_pages_are_refused_without_the_admin_key(served: GatewayHandle, browser) -> None:
    page = browser.new_page()
    for path in ("/ui", f"/ui/sessions/{SESSION}", "/ui/requests/req-x"):
        response = page.goto(served.url + path)
        assert response.status in (401, 403), path
        assert "admin" in page.content().lower()
    page.close()


def test_session_list_session_page_and_request_page(served: GatewayHandle, browser) -> None:
    context = browser.new_context(
        extra_http_headers={"authorization": f"Bearer {ADMIN_KEY}"}, viewport={"width": 1400, "height": 900}
    )
    page = context.new_page()
    page.goto(served.url + "/ui")
    row = page.locator("tr.session-row", has_text=SESSION)
    assert row.count() == 1
    assert row.locator("td").nth(4).inner_text() == "25"
    _shot(page, "ui-sessions")

    row.locator("a").click()
    page.wait_for_selector("table#turns")
    assert page.locator("tr.turn-row").count() == 25
    compacted = page.locator("tr.turn-row.compacted")
    assert compacted.count() >= 1, "the session page must mark the turn where compaction starts"
    assert "Context starts compressing at" in page.inner_text("main")
    assert page.locator("tr.turn-row .seg.summary").count() >= 1
    _shot(page, "ui-session")

    compacted.last.locator("a").first.click()
    page.wait_for_selector("table#decisions")
    tail = page.locator("#zone-dynamic-tail pre.message")
    assert "<reminder>" in tail.last.inner_text(), "the reminder must be the last block of the dynamic tail"
    assert "Never promise a delivery date." in tail.last.inner_text()
    actions = page.locator("tr.decision").all_inner_texts()
    assert any("compact_history" in a for a in actions)
    assert any("move_volatile" in a for a in actions)
    assert page.locator("#zone-compacted-summary pre.message").count() == 1
    assert "ventana replay send req-" in page.inner_text("#replay-cli")
    _shot(page, "ui-request")
    context.close()


def test_login_cookie_opens_the_inspector(served: GatewayHandle, browser) -> None:
    page = browser.new_page()
    page.goto(served.url + "/login")
    page.fill("input[name=key]", ADMIN_KEY)
    page.click("button[type=submit]")
    page.wait_for_selector("table#sessions")
    assert SESSION in page.inner_text("table#sessions")
    page.close()
