"""The sessions list and ``ventana logs`` as a team reads them: callers by their key's name, the client's
own ``user`` and metadata tags, a custom time range.

Two callers with named gateway keys (``auth.key_names``) chat through the gateway (in this process;
the openai SDK over real HTTP, the provider simulator behind it). The inspector's list, a session
page, a request page and ``ventana logs`` must show the keys' names, not their hashes; the list shows
the client's ``user`` and tags and filters by them; a custom from/to range keeps exactly the sessions
active in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from rich.console import Console

from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import Settings, parse_settings
from gateway.store.commands import run_logs
from gateway.store.migrate import upgrade
from gateway.store.sql_recorder import SqlRecorder
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, run_simulator

ADMIN = "vk-lists-admin"
KEYS = {"vk-lists-ci": "ci-bot", "vk-lists-ana": "ana-laptop"}
HEADERS = {"authorization": f"Bearer {ADMIN}"}
#: What one client puts on its own requests: its end user and metadata tags.
LABELS: dict[str, dict[str, object]] = {"vk-lists-ana": {"user": "u-42", "metadata": {"team": "search", "run": "n_1%"}}}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("lists-sim")) as handle:
        yield handle


@pytest.fixture(scope="module")
def served(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings, list[str]]]:
    tmp = tmp_path_factory.mktemp("lists")
    url = f"sqlite:///{tmp / 'store.db'}"
    upgrade(url)
    settings = parse_settings(
        {
            "models": [{"name": "lists", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}],
            "database_url": url,
            "auth": {
                "enabled": True,
                "keys": [hash_key(k) for k in KEYS],
                "admin_keys": [hash_key(ADMIN)],
                "key_names": {hash_key(k): name for k, name in KEYS.items()},
            },
        }
    )
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp / "spool.jsonl"))
    with serve_in_thread(create_app(settings, recorder=recorder)) as base:
        ids = []
        for key in KEYS:
            client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
            raw = client.chat.completions.with_raw_response.create(
                model="lists",
                messages=[{"role": "user", "content": f"hello from {KEYS[key]}"}],
                extra_headers={"X-Session-Id": f"session-of-{KEYS[key]}"},
                **LABELS.get(key, {}),  # type: ignore[arg-type]
            )
            ids.append(raw.headers["x-ventana-request-id"])
        time.sleep(0.5)  # the recorder writes on its own thread
        yield base, settings, ids


def _list(base: str, **query: str) -> str:
    return httpx.get(base + "/ui", params=query, headers=HEADERS).text


def test_callers_show_their_keys_names(served: tuple[str, Settings, list[str]]) -> None:
    base, settings, ids = served
    page = _list(base)
    ci, ana = (hash_key(k)[:12] for k in KEYS)
    for caller, name in ((ci, "ci-bot"), (ana, "ana-laptop")):
        assert f'<td class="caller" title="{caller}">{name}</td>' in page  # before: the hash alone
        assert f'<option value="{caller}" >{name}</option>' in page
    assert "session-of-ana-laptop" not in _list(base, caller=ci)
    request = httpx.get(base + f"/ui/requests/{ids[0]}", headers=HEADERS).text
    assert f'<span id="caller" title="{ci}">ci-bot</span>' in request
    session = httpx.get(base + "/ui/sessions/session-of-ci-bot", params={"caller": ci}, headers=HEADERS).text
    assert f'<span id="caller" title="{ci}">ci-bot</span>' in session

    console = Console(record=True, width=300)
    run_logs(settings, console, session=None, since=None, limit=10, as_json=False, caller="ana-laptop")
    text = console.export_text()
    assert "ana-laptop" in text and "session-of-ana-laptop" in text and "session-of-ci-bot" not in text


def test_a_custom_range_keeps_the_sessions_active_in_it(served: tuple[str, Settings, list[str]]) -> None:
    base, settings, _ = served
    today = time.strftime("%Y-%m-%d", time.gmtime())
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86_400))
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))
    assert "session-of-ci-bot" in _list(base, **{"from": today, "to": today})
    assert "No sessions match." in _list(base, **{"from": tomorrow})  # before: the range was ignored
    assert "No sessions match." in _list(base, to=yesterday)
    page = _list(base, **{"from": yesterday, "to": tomorrow, "range": "1h"})
    assert "session-of-ci-bot" in page and f'id="from" value="{yesterday}"' in page
    console = Console(record=True, width=300)
    run_logs(settings, console, session=None, since=None, until=yesterday, limit=10, as_json=False)
    assert "no requests recorded" in console.export_text()


def test_the_clients_user_and_tags_are_shown_and_filter_the_list(served: tuple[str, Settings, list[str]]) -> None:
    base, _, ids = served
    page = _list(base)
    assert ">user u-42</a>" in page and ">team=search</a>" in page and ">run=n_1%</a>" in page
    for query in ({"user": "u-42"}, {"tag": "team=search"}, {"tag": "run=n_1%"}):
        filtered = _list(base, **query)
        assert "session-of-ana-laptop" in filtered and "session-of-ci-bot" not in filtered, query
    for query in ({"user": "u-4"}, {"tag": "team=sea"}, {"tag": "run=n11%"}):  # exact, wildcards literal
        assert "No sessions match." in _list(base, **query), query
    request = httpx.get(base + f"/ui/requests/{ids[1]}", headers=HEADERS).text
    assert '<span id="client-user">u-42</span>' in request and '<span class="badge tag">team=search</span>' in request


def test_a_filtered_rows_session_page_totals_only_the_matching_turns(served: tuple[str, Settings, list[str]]) -> None:
    """A session whose turns carry two end users: the list filtered by one totals that user's turns, and the
    session page it links to must too (before: the link dropped the filter and the page totalled every turn)."""
    base, _, _ = served
    client = openai.OpenAI(base_url=base + "/v1", api_key="vk-lists-ana", max_retries=0)
    messages: list[dict[str, str]] = []
    billed = {}
    for user, text in (("u-7", "short"), ("u-8", "a much longer question " * 20), ("u-7", "short again")):
        messages.append({"role": "user", "content": text})
        answer = client.chat.completions.create(
            model="lists",
            messages=messages,
            user=user,
            extra_headers={"X-Session-Id": "two-users"},  # type: ignore[arg-type]
        )
        assert answer.usage is not None
        billed[user] = billed.get(user, 0) + answer.usage.prompt_tokens
        messages.append({"role": "assistant", "content": answer.choices[0].message.content or ""})
    time.sleep(0.5)  # the recorder writes on its own thread
    listed = _list(base, user="u-7")
    assert "&amp;user=u-7" in listed, "the row's link keeps the filter"
    ana = hash_key("vk-lists-ana")[:12]
    page = httpx.get(base + "/ui/sessions/two-users", params={"caller": ana, "user": "u-7"}, headers=HEADERS).text
    assert 'id="filtered-banner"' in page and page.count('class="turn-row') == 2
    assert f'id="total-prompt">{billed["u-7"]:,}<' in page
    whole = httpx.get(base + "/ui/sessions/two-users", params={"caller": ana}, headers=HEADERS).text
    assert 'id="filtered-banner"' not in whole and whole.count('class="turn-row') == 3
    assert f'id="total-prompt">{billed["u-7"] + billed["u-8"]:,}<' in whole
