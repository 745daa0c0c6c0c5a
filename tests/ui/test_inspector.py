"""The inspector in a real headless Chromium, against a gateway that served real traffic."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from gateway.api.auth import hash_key
from tests.assembly.loop_helpers import agent_loop
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
BULK = 205  # more sessions than the list's old hard stop of 200
TOOLS_SESSION = "inspector-tools"
IMAGE_SESSION = "inspector-image"
LOOP_SESSION = "inspector-loop"
LOOP_ROUNDS = 40
RESUMED_SESSION = "inspector-loop-resumed"
PIXEL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
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
        "policy": {
            "rules": {"rules": [{"text": "Never promise a delivery date.", "priority": 1}]},
            "tools": {"max_tools": 2, "min_tools": 1, "min_offered": 0, "mode": "prune", "min_tool_tokens": 0},
            # On the 8,000-token window the default target (0.25) leaves no room for a summary prepared ahead
            # or a clearing batch to land under it (docs/compaction.md); the pages under test show both.
            "compaction": {"target": 0.35},
        },
    }
    with run_simulator(tmp) as sim:
        config["models"] = sim_models(sim.base_url)
        with run_gateway(tmp, config) as gw:
            _bulk_sessions(gw)
            _tools_and_image(gw)
            _traffic(gw)
            _loop_traffic(gw)
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


def _loop_traffic(gw: GatewayHandle) -> None:
    """An agent loop of read_file rounds at an 8K window: results are cleared, then rounds summarised."""
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-user")
    for n in range(1, LOOP_ROUNDS + 1):
        client.chat.completions.create(
            model="small-window",
            messages=agent_loop(n, words=160),  # type: ignore[arg-type]
            extra_headers={"X-Session-Id": LOOP_SESSION},
        )
    # A loop resumed with many new rounds at once: past the threshold with no summary prepared
    # ahead, and clearing the older results alone reaches the target, so that turn clears.
    for n in (4, 24):
        client.chat.completions.create(
            model="small-window",
            messages=agent_loop(n, words=160),  # type: ignore[arg-type]
            extra_headers={"X-Session-Id": RESUMED_SESSION},
        )


def _bulk_sessions(gw: GatewayHandle) -> None:
    """Many one-turn sessions, oldest first, so the oldest is the one a list cut at 200 would lose."""
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-user")
    for i in range(BULK):
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"Bulk question number {i}"}],
            extra_headers={"X-Session-Id": f"bulk-{i:03d}"},
        )


def _tool(name: str, description: str) -> dict[str, object]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }


TOOLS = [
    _tool("get_weather", "Current weather and forecast for a city"),
    _tool("book_flight", "Book a flight between two airports on a date"),
    _tool("convert_currency", "Convert an amount of money between currencies"),
    _tool("translate_text", "Translate a text into another language"),
    _tool("send_email", "Send an email message to a recipient"),
    _tool("search_recipes", "Search cooking recipes by ingredient"),
]


def _tools_and_image(gw: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-user")
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "What is the weather forecast in Paris for this city tomorrow?"}],
        tools=TOOLS,  # type: ignore[arg-type]
        extra_headers={"X-Session-Id": TOOLS_SESSION},
    )
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is on this label?"},
                    {"type": "image_url", "image_url": {"url": PIXEL}},
                ],
            }
        ],
        extra_headers={"X-Session-Id": IMAGE_SESSION},
    )


def _wait_recorded(gw: GatewayHandle) -> None:
    deadline = time.monotonic() + 30
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    while time.monotonic() < deadline:
        page = httpx.get(f"{gw.url}/ui/sessions/{SESSION}", headers=headers)
        loop = httpx.get(f"{gw.url}/ui/sessions/{LOOP_SESSION}", headers=headers)
        if (
            page.status_code == 200
            and page.text.count('class="turn-row') >= 25
            and loop.text.count('class="turn-row') >= LOOP_ROUNDS
        ):
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
    page.goto(served.url + "/ui?sort=turns")
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
    tail = page.locator("#zone-dynamic-tail .message")
    assert "<reminder>" in tail.last.inner_text(), "the reminder must be the last block of the dynamic tail"
    assert "Never promise a delivery date." in tail.last.inner_text()
    actions = page.locator("tr.decision").all_inner_texts()
    assert any("compact_history" in a for a in actions)
    assert any("move_volatile" in a for a in actions)
    assert page.locator("#zone-compacted-summary .message").count() == 1
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


def _admin(browser) -> object:
    return browser.new_context(
        extra_http_headers={"authorization": f"Bearer {ADMIN_KEY}"}, viewport={"width": 1400, "height": 900}
    )


def _request_page_of(page, session: str, turn: int | None = None) -> None:
    page.goto(f"{_url(page)}/ui/sessions/{session}")
    rows = page.locator("tr.turn-row")
    (rows.nth(turn - 1) if turn else rows.last).locator("a").first.click()
    page.wait_for_selector("table#decisions")


def _url(page) -> str:
    return page.url.split("/ui")[0]


def test_the_diff_shows_one_line_per_rendered_line(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui/sessions/{SESSION}")
    page.locator("tr.turn-row.compacted a").first.click()
    page.wait_for_selector("#diff")
    lines = page.locator("#diff .line")
    assert lines.count() >= 3, "the diff must have its lines, not one run-on line"
    text = [lines.nth(i).inner_text().split(" full text (", 1)[0] for i in range(lines.count())]
    assert any(line.startswith("+") and "<summary" in line for line in text), "the summary is an added line"
    assert page.locator("#diff .line.del").count() >= 1
    # by identity: the summarised range is one line, with its full text one click away, and a message
    # forwarded unchanged is never both removed and added (before: every index after the summary shifted)
    summarised = [line for line in text if line.startswith("- #") and "summarised" in line]
    assert len(summarised) == 1
    removed = {line[1:].split("]", 1)[-1] for line in text if line.startswith("-") and "[" in line}
    added = {line[1:].split("]", 1)[-1] for line in text if line.startswith("+") and "[" in line}
    assert not (removed & added)
    full = page.locator("#diff .line.del details.full").first
    full.locator("summary").click()
    assert full.locator("pre").inner_text().count("#") >= 2
    context.close()


def test_a_prepared_compaction_is_counted_once(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui?q={SESSION}")
    listed = int(page.locator("tr.session-row td.compactions").inner_text())
    page.goto(f"{served.url}/ui/sessions/{SESSION}")
    badged = page.locator("tr.turn-row .badge.compaction").count()
    with_summary = page.locator("tr.turn-row", has=page.locator(".seg.summary")).count()
    assert listed == badged >= 1, f"the list says {listed} compactions, the session page badges {badged}"
    assert with_summary > badged, "later turns resend the summary: they are not new compactions"
    assert page.locator("tr.turn-row .badge.reused").count() == with_summary - badged
    assert page.locator("#chart rect.mark.compaction").count() == badged
    page.locator("tr.turn-row.compacted a").first.click()
    page.wait_for_selector("#changes")
    assert "summarised (prepared ahead)" in page.inner_text("#changes"), "the compaction came from the prepared path"
    context.close()


def test_the_sessions_list_pages_past_200_with_a_total(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(served.url + "/ui")
    total = BULK + 5  # with the demo, tools, image and the two loop sessions
    assert page.inner_text("#count") == f"Sessions 1–100 of {total}"
    assert page.locator("tr.session-row").count() == 100
    page.click("#next-page")
    page.click("#next-page")
    assert page.inner_text("#count") == f"Sessions 201–{total} of {total}"
    assert page.locator("tr.session-row", has_text="bulk-000").count() == 1, "the oldest session is on the last page"
    assert page.locator("#next-page").count() == 0
    page.goto(served.url + "/ui?model=small-window")
    assert page.inner_text("#count") == "Sessions 1–3 of 3", "the demo and the two loop sessions"
    page.goto(served.url + "/ui?sort=turns&dir=desc")
    assert LOOP_SESSION in page.locator("tr.session-row").first.inner_text(), "40 turns"
    assert SESSION in page.locator("tr.session-row").nth(1).inner_text(), "25 turns"
    page.goto(served.url + "/ui?status=errors")
    assert page.inner_text("#count") == "No sessions match."
    page.goto(served.url + "/ui?q=bulk-007")
    row = page.locator("tr.session-row")
    assert row.count() == 1 and "Bulk question number 7" in row.locator(".preview").inner_text()
    assert row.locator("td.cost").inner_text().startswith("$"), "gpt-4o-mini has a price in litellm's map"
    context.close()


def test_missing_pages_are_an_html_404_not_a_rejected_request(served: GatewayHandle, browser) -> None:
    def rejected() -> float:
        text = httpx.get(served.url + "/metrics").text
        return sum(
            float(line.split()[-1]) for line in text.splitlines() if line.startswith("ventana_rejected_requests_total{")
        )

    before = rejected()
    context = _admin(browser)
    page = context.new_page()
    for path in ("/ui/sessions/no-such-session", "/ui/requests/req-nope"):
        response = page.goto(served.url + path)
        assert response.status == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert page.inner_text("#not-found").startswith("No ")
    context.close()
    assert rejected() == before


def test_the_request_page_opens_with_what_happened(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui/sessions/{TOOLS_SESSION}")
    page.locator("tr.turn-row a").first.click()
    page.wait_for_selector("#outcome")
    changes = page.inner_text("#changes")
    assert "tools removed" in changes and "book_flight" in changes, changes
    assert "get_weather" not in changes.split("removed:")[-1], "the relevant tool is kept"
    assert "→" in page.inner_text("#tokens") and "saved" in page.inner_text("#tokens")
    assert page.inner_text("#cost b").startswith("$")
    assert not page.locator("#json").is_visible(), "JSON is on demand"
    page.locator("#json-box summary").click()  # fetched on opening: a 500-turn chat's JSON is as long as its page
    page.wait_for_function("document.getElementById('json').textContent.includes('request_id')")

    page.goto(f"{served.url}/ui/sessions/{IMAGE_SESSION}")
    page.locator("tr.turn-row a").first.click()
    page.wait_for_selector("#outcome")
    image = page.locator(".msg.user img.image")
    assert image.count() == 1 and image.evaluate("i => i.naturalWidth") == 1

    page.goto(f"{served.url}/ui/sessions/{SESSION}")
    page.locator("tr.turn-row").nth(4).locator("a").first.click()
    page.wait_for_selector("#prev-turn")
    assert "turn 5," in page.inner_text("main")
    page.click("#next-turn")
    page.wait_for_selector("#outcome")
    assert "turn 6," in page.inner_text("main")
    context.close()


def test_the_first_tool_set_is_no_change(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui/sessions/{TOOLS_SESSION}")
    assert page.locator("tr.turn-row .badge.tools").count() == 0, "turn 1 has the session's first tool set"
    context.close()


def test_the_session_bar_draws_the_summary_before_the_history(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui/sessions/{SESSION}")
    row = page.locator("tr.turn-row", has=page.locator(".seg.summary")).last
    names = row.locator(".seg").evaluate_all("segs => segs.map(s => s.classList[1])")
    assert names.index("summary") < names.index("history"), names
    context.close()


def test_the_request_page_names_the_rounds_and_tools_compaction_touched(served: GatewayHandle, browser) -> None:
    context = _admin(browser)
    page = context.new_page()
    page.goto(f"{served.url}/ui/sessions/{LOOP_SESSION}")
    assert page.locator("tr.turn-row").count() == LOOP_ROUNDS
    page.locator("tr.turn-row.compacted a").first.click()
    page.wait_for_selector("#changes")
    changes = page.inner_text("#changes")
    found = re.search(r"rounds 1-(\d+) \(messages 2-\d+; read_file x(\d+)\) summarised", changes)
    assert found and found.group(1) == found.group(2), changes
    _request_page_of(page, RESUMED_SESSION, 2)
    cleared = page.inner_text("#changes")
    assert re.search(r"cleared \d+ tool results in the rounds at messages 2-\d+: read_file #3, read_file #5", cleared)
    context.close()
