"""The inspector's figures in a real headless Chromium, over a store that ``ventana serve`` filled.

The traffic: a tool chat whose model calls the gateway's ``find_tools`` (served rounds), a
long chat, two callers that send the same ``X-Session-Id``, refusals, a provider error, and a
request through each front door (chat, Responses, Messages). Each check is what a page shows.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import openai
import pytest
import yaml

from gateway.api.auth import hash_key
from gateway.store.engine import make_engine
from gateway.store.queries import list_requests
from tests.assembly.tool_fixtures import catalogue
from tests.procs import GatewayHandle, run_gateway, run_simulator, sim_models

pytestmark = pytest.mark.timeout(900)
ADMIN_KEY = "vk-figures-pages-admin"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]
LONG_TURNS = 500
SHARED = "shared-name"
TOOLS = catalogue()
NEEDS = [
    "What's the weather forecast in Paris tomorrow?",
    "Convert 300 euros into dollars at today's exchange rate please.",
    "Set a countdown timer for 25 minutes.",
    "Translate the hotel confirmation text into Portuguese.",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("figures-pages")
    config: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp / 'figures.db'}",
        "auth": {"admin_keys": [hash_key(ADMIN_KEY)]},
        "policy": {"tools": {"mode": "prune", "max_tools": 3}},
    }
    with run_simulator(tmp) as sim:
        config["models"] = sim_models(sim.base_url)
        with run_gateway(tmp, config) as gw:
            found: dict[str, Any] = {"gw": gw, "db": config["database_url"], "tmp": tmp, "config": config}
            found["tools"] = _tool_chat(gw)
            found["long_ids"] = _long_chat(gw)
            found["long"] = found["long_ids"][-1]
            _shared_name(gw)
            found["refused"] = _refusals(gw)
            sim.faults({"kind": "status", "status": 500, "times": 3})
            found["failed"] = _failing(gw)
            found["doors"] = _doors(gw)
            _wait_recorded(config["database_url"], found)
            yield found


def _client(gw: GatewayHandle, key: str = "sk-user", session: str | None = None) -> openai.OpenAI:
    headers = {"X-Session-Id": session} if session else {}
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, default_headers=headers)


def _tool_chat(gw: GatewayHandle) -> list[str]:
    client = _client(gw, session="tool-chat")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel assistant."}]
    ids = []
    for k, need in enumerate(NEEDS * 2):
        messages.append({"role": "user", "content": f"{need} (request {k})"})
        for _ in range(3):
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini",
                messages=messages,  # type: ignore[arg-type]
                tools=TOOLS,  # type: ignore[arg-type]
            )
            ids.append(raw.headers["x-ventana-request-id"])
            message = raw.parse().choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for c in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": c.id, "content": f"{c.function.name}: done"})
    return ids


def _long_chat(gw: GatewayHandle) -> list[str]:
    """All 500 turns through ``ventana serve``, one session, sent back to back over one keep-alive connection.

    The client is plain httpx, not the OpenAI SDK: the SDK validates and copies every message of every request
    on the client side (``maybe_transform``: 0.4 s a call at 1,000 messages here), which made the chat ~95 s of
    client work against ~8 s at the gateway.
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You answer briefly."}]
    headers = {"authorization": "Bearer sk-user", "X-Session-Id": "long-chat"}
    ids = []
    with httpx.Client(base_url=gw.base_url, headers=headers, timeout=60) as client:
        for i in range(LONG_TURNS):
            messages.append({"role": "user", "content": f"Question {i}: what is {i} plus {i}?"})
            sent = client.post("/chat/completions", json={"model": "gpt-4o-mini", "messages": messages})
            assert sent.status_code == 200, sent.text
            ids.append(sent.headers["x-ventana-request-id"])
            messages.append({"role": "assistant", "content": sent.json()["choices"][0]["message"]["content"]})
    return ids


def _shared_name(gw: GatewayHandle) -> None:
    for key in ("sk-alice", "sk-bob"):
        _client(gw, key, SHARED).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"hello from {key}"}]
        )


def _refusals(gw: GatewayHandle) -> dict[int, str]:
    out = {}
    for status, body in (
        (404, {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}),
        (400, {"model": "gpt-4o-mini", "messages": "not a list"}),
    ):
        r = httpx.post(gw.base_url + "/chat/completions", json=body, headers={"authorization": "Bearer sk-user"})
        assert r.status_code == status
        out[status] = r.headers["x-ventana-request-id"]
    return out


def _failing(gw: GatewayHandle) -> str:
    with pytest.raises(openai.APIStatusError) as raised:
        _client(gw, session="failing").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "this one fails upstream"}]
        )
    return str(raised.value.response.headers["x-ventana-request-id"])


def _doors(gw: GatewayHandle) -> dict[str, str]:
    headers = {"authorization": "Bearer sk-user"}
    responses = httpx.post(
        gw.base_url + "/responses",
        json={"model": "gpt-4o-mini", "input": "hello through the Responses door"},
        headers={**headers, "X-Session-Id": "door-responses"},
        timeout=30,
    )
    messages = httpx.post(
        gw.base_url + "/messages",
        json={"model": "gpt-4o-mini", "max_tokens": 50, "messages": [{"role": "user", "content": "hello Messages"}]},
        headers={**headers, "X-Session-Id": "door-messages"},
        timeout=30,
    )
    assert responses.status_code == 200 and messages.status_code == 200, (responses.text, messages.text)
    return {
        "responses": responses.headers["x-ventana-request-id"],
        "messages": messages.headers["x-ventana-request-id"],
    }


def _wait_recorded(url: str, found: dict[str, Any]) -> None:
    # Every turn of the long chat, not only its newest: batches need not land in order (one the recorder
    # could not write is spooled and replayed later).
    wanted = {*found["long_ids"], found["failed"], *found["refused"].values(), *found["doors"].values()}
    engine = make_engine(url)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        have = {r.request_id for r in list_requests(engine, limit=100_000)}
        if wanted <= have:
            engine.dispose()
            return
        time.sleep(0.3)
    raise AssertionError(f"not recorded in time: {wanted - have}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: tests/run.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        launched.close()


def _page(browser: Any, width: int = 1280) -> Any:
    context = browser.new_context(
        extra_http_headers={"authorization": f"Bearer {ADMIN_KEY}"}, viewport={"width": width, "height": 900}
    )
    return context.new_page()


def test_two_callers_sharing_a_session_id_are_two_sessions(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    page.goto(store["gw"].url + f"/ui?q={SHARED}")
    rows = page.locator("tr.session-row")
    assert rows.count() == 2, "before: one session mixing both callers' turns"
    callers = {rows.nth(i).locator("td.caller").inner_text() for i in range(2)}
    assert len(callers) == 2
    rows.first.locator("a").first.click()
    page.wait_for_url("**/ui/sessions/**")  # a click does not wait for the page it opens
    page.wait_for_load_state("load")
    assert page.locator("tr.turn-row").count() == 1, "the session page shows one caller's turns"


def test_refusals_are_found_by_request_id_in_the_ui_and_the_cli(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    for status, request_id in store["refused"].items():
        page.goto(store["gw"].url + f"/ui?q={request_id}")
        hit = page.locator("#request-hits li", has_text=request_id)
        assert hit.count() == 1 and str(status) in hit.inner_text()
        hit.locator("a").click()
        page.wait_for_url(f"**/ui/requests/{request_id}")  # before: checked while the search page was still shown
        page.wait_for_load_state("load")
        assert page.locator("#refused-banner").is_visible()
        assert page.locator("#route").inner_text() == "chat"
        shown = _cli_logs(store, "--request", request_id)
        assert request_id in shown and "refused" in shown and str(status) in shown


def test_an_upstream_error_and_each_door_show_on_their_pages(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    page.goto(store["gw"].url + f"/ui/requests/{store['failed']}")
    assert "500" in page.locator("#error").inner_text()
    detail = page.locator("#error-detail").inner_text()  # before: the last message only, no attempts
    attempts = [line for line in detail.splitlines() if line[:1].isdigit()]
    assert "upstream attempts" in detail and attempts and all("500: " in a and "simulated 500" in a for a in attempts)
    for door, request_id in store["doors"].items():
        page.goto(store["gw"].url + f"/ui/requests/{request_id}")
        assert page.locator("#route").inner_text() == door, "before: every request looked like chat"


def test_served_tool_calls_are_steps_with_their_tokens(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    shown = 0
    for request_id in store["tools"]:
        page.goto(store["gw"].url + f"/ui/requests/{request_id}")
        steps = page.locator("tr.step")
        if steps.count() > 1:
            shown += 1
            assert "find_tools" in steps.first.inner_text()
            assert "over" in page.locator("#tokens").inner_text()  # original -> forwarded over N calls
    assert shown, "no turn of the tool chat made a served find_tools round"


def test_lists_are_bounded_and_every_ui_path_answers_html(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    base = store["gw"].url
    page.goto(base + "/ui?per=2&page=999")
    count = page.locator("#count").inner_text()
    first, _, total = count.replace("Sessions ", "").partition(" of ")
    assert int(first.split("–")[0]) <= int(total), count  # before: "Sessions 99801-99800 of 2110"
    for per in ("-5", "0"):
        page.goto(base + f"/ui?per={per}")
        assert page.locator("tr.session-row").count() > 1, "before: one row"
    for path in ("/ui/nothing/here", "/ui/requests/"):
        response = page.goto(base + path)
        assert response.status == 404 and response.headers["content-type"].startswith("text/html"), path
    page.goto(base + "/ui?sort=cost&dir=desc")
    costs = [c.replace("$", "") for c in page.locator("td.cost").all_inner_texts()]
    assert costs and all(c != "0.0000" for c in costs)
    values = [float(c) for c in costs if c not in ("0", "–")]
    assert values == sorted(values, reverse=True)


def test_one_row_per_session_at_1024_px(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser, width=1024)
    page.goto(store["gw"].url + "/ui")
    heights = [page.locator("tr.session-row").nth(i).bounding_box()["height"] for i in range(5)]
    assert max(heights) <= 48, heights  # a link and its one-line preview: before, a row wrapped to ~5 lines


def test_the_largest_request_page_is_a_fraction_of_its_history(store: dict[str, Any], browser: Any) -> None:
    """A 1,000-message request's page folds its middle: the document and the page the browser builds are a
    small part of the whole history's (every message one click away), which is what keeps it quick on any
    machine. Its time is measured in ``benchmarks.ui_pages``, not asserted here: a wall-clock bound read
    1.07 s on a slower machine with the page unchanged."""
    page = _page(browser)
    url = store["gw"].url + f"/ui/requests/{store['long']}"
    folded = page.goto(url, wait_until="load")
    assert folded is not None and page.locator("#tokens").count() == 1, "the page is the request's, not an error"
    folded_bytes, folded_nodes = len(folded.body()), page.evaluate("document.getElementsByTagName('*').length")
    href = page.locator("a.show-all").get_attribute("href")
    assert href
    whole = page.goto(urljoin(url, href), wait_until="load")
    assert whole is not None and page.locator(".message").count() == 2 * LONG_TURNS
    whole_bytes, whole_nodes = len(whole.body()), page.evaluate("document.getElementsByTagName('*').length")
    assert folded_nodes * 5 < whole_nodes, (folded_nodes, whole_nodes)
    assert folded_bytes * 3 < whole_bytes, (folded_bytes, whole_bytes)


def test_the_500_turn_chat_is_one_session_of_500_turns(store: dict[str, Any], browser: Any) -> None:
    page = _page(browser)
    page.goto(store["gw"].url + f"/ui/requests/{store['long']}")
    sent = 2 * LONG_TURNS  # the system prompt, 500 questions and 499 answers
    assert page.locator(".folded-run").count() == 1, "the middle of the history is folded to one line"
    assert page.locator(".message").count() < 100
    page.locator("a.show-all").click()  # every message one click away
    page.wait_for_selector(".message >> nth=999")
    assert page.locator(".message").count() == sent
    page.goto(store["gw"].url + f"/ui/requests/{store['long']}")
    page.locator("a", has_text="long-chat").first.click()
    page.wait_for_url("**/ui/sessions/long-chat*")
    page.wait_for_load_state("load")  # a count taken while 500 rows were still parsing saw 128, then 444
    assert page.locator("tr.turn-row").count() == LONG_TURNS


def _cli_logs(store: dict[str, Any], *args: str) -> str:
    config = Path(store["tmp"]) / "cli.yaml"
    config.write_text(yaml.safe_dump(store["config"]))
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "logs", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
