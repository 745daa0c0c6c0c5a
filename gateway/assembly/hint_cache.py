"""Tell an OpenAI upstream which cache a request belongs to, unless the client already did.

OpenAI routes requests that share a ``prompt_cache_key`` to the same cache, so the turns of
one long session (an agent loop of hundreds of rounds) find the prefix the previous turn
left there. Clients rarely set it; the gateway knows the caller and the session, so it sets
``prompt_cache_key`` to a hash of both (never the caller's key itself, and never shared
across callers). ``policy.compaction.prompt_cache_retention`` (``in_memory`` or ``24h``)
asks for longer retention. A value the client sent is never replaced, and other providers
(which have no such fields) are left alone, and so is a prompt too short to be cached
(under 1,024 tokens), which then goes out exactly as sent. It records no decision: it would be the same
on every request, and the key is in the recorded body.

A llama.cpp server (``engine: llama.cpp``) keeps one KV cache per slot and gives a request whichever slot
is free, so two sessions that alternate evict each other's prefix. For it the gateway sets ``cache_prompt``
and pins the session to ``id_slot`` = a hash of caller and session modulo ``engine_slots``, again only where
the client set neither; OpenAI's fields are not sent to it.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Context, Decision

PASS = "hint_cache"
KEY_PREFIX = "ventana-"
#: OpenAI caches prompts of at least this many tokens; a shorter one gains nothing from a key.
CACHE_MINIMUM_TOKENS = 1024


#: Every turn of a session asks for the same key: one sha256 per session, not per request.
@lru_cache(maxsize=4096)
def cache_key(caller: str, session_id: str) -> str:
    """A stable key per caller and session (64 characters at most, as OpenAI allows)."""
    return KEY_PREFIX + hashlib.sha256(f"{caller}\x00{session_id}".encode()).hexdigest()[:32]


def engine_slot(caller: str, session_id: str, slots: int) -> int:
    """The llama.cpp slot a session is pinned to: stable across turns, replicas and restarts."""
    return int(cache_key(caller, session_id).removeprefix(KEY_PREFIX)[:8], 16) % slots


def hint_cache(ctx: Context, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """Set ``prompt_cache_key`` (and the configured retention) for an OpenAI upstream when the client set none."""
    if ctx.env.engine == "llama.cpp":
        return _hint_llama_cpp(ctx, policy)
    if ctx.env.provider != "openai" or ctx.prompt_tokens_below(CACHE_MINIMUM_TOKENS):
        return ctx, []  # checked first: most requests of a chat app are short, and then nothing is hashed
    set_ = openai_cache_fields(ctx, policy)  # empty without a session, or when the client set them
    if not set_:
        return ctx, []
    return ctx.replace(params={**ctx.params, **set_}), []


def openai_cache_fields(ctx: Context, policy: CompactionPolicy) -> dict[str, object]:
    """The cache fields this pass adds to an OpenAI request (a summary that continues the request
    before this pass ran adds them too, so it reads the same cache)."""
    params = ctx.params
    set_: dict[str, object] = {}
    if ctx.env.engine is not None or ctx.env.provider != "openai" or not ctx.session.session_id:
        return set_
    if policy.prompt_cache_key and params.get("prompt_cache_key") is None:
        set_["prompt_cache_key"] = cache_key(ctx.env.caller, ctx.session.session_id)
    retention = policy.prompt_cache_retention
    if retention and params.get("prompt_cache_retention") is None and "prompt_cache_options" not in params:
        set_["prompt_cache_retention"] = retention
    return set_


def _hint_llama_cpp(ctx: Context, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """``cache_prompt`` and a per-session ``id_slot`` for llama.cpp, unless the client chose them."""
    session_id = ctx.session.session_id
    if not policy.prompt_cache_key or not session_id:
        return ctx, []
    params = dict(ctx.params)
    set_: dict[str, object] = {}
    if "cache_prompt" not in params:
        set_["cache_prompt"] = True
    if "id_slot" not in params:
        set_["id_slot"] = engine_slot(ctx.env.caller, session_id, ctx.env.engine_slots)
    if not set_:
        return ctx, []
    return ctx.replace(params={**params, **set_}), []
