"""hint_cache: an OpenAI upstream gets a per-caller, per-session prompt_cache_key; a client's own is kept."""

from __future__ import annotations

from dataclasses import replace

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.hint_cache import cache_key, hint_cache
from tests.assembly.compaction_helpers import make_ctx

MESSAGES = [{"role": "user", "content": "Summarise the incident report. " + "Disk sdb1 failed at 02:10. " * 150}]


def _ctx(provider: str = "openai", caller: str = "c1", session: str = "s-test", **params: object):
    ctx = make_ctx(MESSAGES, params={"model": "m", **params})
    return replace(
        ctx, env=replace(ctx.env, provider=provider, caller=caller), session=replace(ctx.session, session_id=session)
    )


def test_sets_a_key_per_caller_and_session() -> None:
    out, decisions = hint_cache(_ctx(), CompactionPolicy())
    assert out.params["prompt_cache_key"] == cache_key("c1", "s-test")
    assert decisions == []
    other_caller = hint_cache(_ctx(caller="c2").replace(session=_ctx().session), CompactionPolicy())[0]
    assert other_caller.params["prompt_cache_key"] != out.params["prompt_cache_key"], "never shared across callers"
    assert len(out.params["prompt_cache_key"]) <= 64 and "c1" not in out.params["prompt_cache_key"]


def test_never_overrides_what_the_client_sent() -> None:
    ctx = _ctx(prompt_cache_key="mine", prompt_cache_retention="in_memory")
    out, decisions = hint_cache(ctx, CompactionPolicy(prompt_cache_retention="24h"))
    assert out is ctx and decisions == []


def test_asks_for_retention_when_configured() -> None:
    ctx = _ctx()
    out, _ = hint_cache(ctx, CompactionPolicy(prompt_cache_retention="24h"))
    assert out.params["prompt_cache_retention"] == "24h"
    assert "prompt_cache_retention" not in hint_cache(ctx, CompactionPolicy())[0].params


def test_a_prompt_too_short_to_cache_goes_out_as_sent() -> None:
    ctx = _ctx()
    short = ctx.replace(messages=({"role": "user", "content": "hi"},))
    assert hint_cache(short, CompactionPolicy())[0] is short


def test_leaves_other_providers_and_switched_off_alone() -> None:
    ctx = _ctx(provider="anthropic")
    assert hint_cache(ctx, CompactionPolicy())[0] is ctx
    ctx = _ctx()
    assert hint_cache(ctx, CompactionPolicy(prompt_cache_key=False))[0] is ctx


def test_a_short_prompt_hashes_nothing_and_a_sessions_turns_hash_once() -> None:
    """The key is a sha256, ~30-40 us after an idle loop on a VM whose idle vCPU halts: made only for a
    prompt that gets it, and once per caller and session, not per turn."""
    cache_key.cache_clear()
    ctx = _ctx(session="s-once")
    hint_cache(ctx.replace(messages=({"role": "user", "content": "hi"},)), CompactionPolicy())
    assert cache_key.cache_info().currsize == 0, "a prompt too short to cache asked for a key"
    first = hint_cache(ctx, CompactionPolicy())[0].params["prompt_cache_key"]
    again = hint_cache(_ctx(session="s-once"), CompactionPolicy())[0].params["prompt_cache_key"]
    info = cache_key.cache_info()
    assert first == again and (info.misses, info.hits) == (1, 1)
