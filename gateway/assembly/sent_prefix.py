"""The session's sent request cut where a range to summarise ends: what a continued summary resends.

A summariser that shares the session's provider cache can be asked for a summary as the continuation
of the request the provider already holds (``summarize.continued``). That request is ``sent`` (the
assembled request as forwarded), cut after the last message standing for ``originals[:end]``: the head,
the earlier summary where it was sent in place of its range, then the messages aged since. The cut is
offered only when those messages went out exactly as the client sent them: a range the gateway
rewrote (cleared results, condensed reasoning, inserted blocks) is summarised from its originals in the
compact request, so a summary never loses what a clearing hid from the sent request.

A summary made in the pass itself (no summary was prepared ahead) continues the session's previous
request as this turn rebuilds it (``rebuilt_prefix``): its messages with the summary in use applied,
the cache key ``hint_cache`` will add. How much of the cut the provider holds is predicted from the
blocks of the session's previous request (``prefix.compare_prefix``), the same prediction every
turn's cache report makes: a rebuilt request that differs from what was sent is predicted uncached,
and the compact request is cheaper. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.assembly.compaction_layout import apply_checkpoint, summary_message
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Context, ContinuingSummarizer, Message, SentPrefix, Summarizer
from gateway.assembly.hint_cache import openai_cache_fields
from gateway.assembly.prefix import compare_prefix, prefix_blocks

#: Body fields that choose which provider cache a request reads (OpenAI's routing key).
CACHE_FIELDS = ("prompt_cache_key",)


def continuing(summarizer: Summarizer | None) -> ContinuingSummarizer | None:
    """``summarizer`` when it can be asked to continue the session's request and shares its cache."""
    return summarizer if isinstance(summarizer, ContinuingSummarizer) and summarizer.shares_cache else None


def sent_prefix(
    sent: Context, originals: Sequence[Message], start: int, end: int, previous: Checkpoint | None
) -> SentPrefix | None:
    """``sent`` cut where ``originals[start:end]`` ends (``previous`` covering its beginning), or None."""
    messages = sent.messages
    applied = previous is not None and start < len(messages) and messages[start] == summary_message(previous)
    lo = previous.end if applied and previous is not None else start
    first_aged = start + 1 if applied else start
    cut = first_aged + (end - lo)
    if lo > end or cut > len(messages) or tuple(messages[first_aged:cut]) != tuple(originals[lo:end]):
        return None
    kept = tuple(messages[:cut])
    report = compare_prefix(prefix_blocks(sent.replace(messages=kept)), sent.session.previous_prefix)
    return SentPrefix(
        messages=kept,
        tools=sent.tools,
        params={k: sent.params[k] for k in CACHE_FIELDS if k in sent.params},
        first=start,
        cached=report.predicted_cached_tokens,
        cache_ratio=sent.env.cache_price_ratio,
        window=sent.env.context_window,
    )


def rebuilt_prefix(
    ctx: Context,
    originals: Sequence[Message],
    start: int,
    end: int,
    previous: Checkpoint | None,
    active: bool,
    policy: CompactionPolicy,
) -> SentPrefix | None:
    """``sent_prefix`` of the previous request as ``ctx`` (mid-assembly) rebuilds it: ``previous`` applied
    when it is the summary in use (``active``), with the cache fields the finished request carries."""
    if continuing(ctx.env.summarizer) is None:
        return None  # nothing would read it: spare the prediction
    messages = apply_checkpoint(ctx.messages, previous) if previous is not None and active else ctx.messages
    params = {**ctx.params, **openai_cache_fields(ctx, policy)}
    return sent_prefix(ctx.replace(messages=messages, params=params), originals, start, end, previous)
