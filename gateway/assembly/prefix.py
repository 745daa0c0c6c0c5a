"""Predict the provider's prompt-cache hit from the layout of the assembled request.

Providers cache exact prefixes: OpenAI reuses the longest prefix of an earlier prompt, in
128-token steps, once the prompt reaches 1024 tokens. The gateway knows the layout it sent
(tool definitions first, then every message), so it can predict the hit before the provider
reports it: split the assembled request into blocks (one per tool, one per message), each
``(component, digest, tokens)``, and compare the digests with the blocks of the session's
previous request. The tokens of the leading blocks both share, rounded down like the
provider rounds, are the predicted cached tokens. Comparing this prediction with the
provider's ``cached_tokens`` shows whether the cache behaves as the layout says it should.

A *prefix break* is a request that differs from the previous one before the point where
the previous one's stable part ended. The trailing ``<reminder>`` block is excluded from
that end point: it is rebuilt every turn by design and the next turn's history follows
where it stood. A break is labelled with the component that changed (``tools``,
``system``, ``summary``, ``documents``, ``history``, ``reminder``), so a cache regression
names its cause.

Everything here is pure: a Context goes in, a report comes out; the caller keeps
``report.keys()`` in ``SessionState.previous_prefix`` for the next turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.assembly.context import Context
from gateway.object_memo import ObjectMemo
from gateway.tokens import REPLY_PRIMING, TOOLS_OVERHEAD, TokenCounter, render_tool

#: Components in layout order. A break is labelled with the earlier of the two components
#: found at the first differing position (a tool removed shows ``tools``, not ``system``).
COMPONENTS: tuple[str, ...] = ("tools", "system", "summary", "documents", "history", "reminder")
CACHE_MINIMUM = 1024
CACHE_STEP = 128
_DIGEST_CHARS = 16
_DOCUMENT_MARKERS = ("<documents", "<recalled", "<memory")
_MEMO_MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PrefixBlock:
    """One unit of the prompt as the provider tokenises it: a tool definition or a message."""

    component: str
    digest: str
    tokens: int

    def key(self) -> str:
        """The form kept in ``SessionState.previous_prefix``: component and digest, no text."""
        return f"{self.component}:{self.digest}"


@dataclass(frozen=True, slots=True)
class PrefixReport:
    """The assembled request's blocks compared with the previous request of the session.

    ``shared_tokens`` counts the leading blocks both requests have; ``predicted_cached_tokens``
    is that rounded like the provider (0 under 1024, else down to a multiple of 128).
    ``break_component`` is None unless the request broke the previous prefix.
    """

    blocks: tuple[PrefixBlock, ...]
    shared_tokens: int
    predicted_cached_tokens: int
    break_component: str | None

    def keys(self) -> tuple[str, ...]:
        return tuple(b.key() for b in self.blocks)

    def component_tokens(self) -> dict[str, int]:
        """Prompt tokens per component (the reply priming is not part of any component)."""
        out: dict[str, int] = {}
        for block in self.blocks:
            out[block.component] = out.get(block.component, 0) + block.tokens
        return out


def component_of(message: Mapping[str, Any]) -> str:
    """Name the component a message belongs to, from its role and the gateway's block markers."""
    content = message.get("content")
    if isinstance(content, str):
        if content.startswith("<reminder>"):
            return "reminder"
        if content.startswith("<summary"):
            return "summary"
        if content.startswith(_DOCUMENT_MARKERS):
            return "documents"
    if message.get("role") in ("system", "developer"):
        return "system"
    return "history"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]


#: Agents resend their whole history every turn: a message's block is computed once per
#: process and found again by its canonical bytes (per encoding, since tokens depend on it).
#: A cache, not state: clearing it changes no result. Cleared whole when full, like tokens.py.
_MEMO: dict[str, dict[bytes, PrefixBlock]] = {}
_memo_bytes = 0


def _remember(memo: dict[bytes, PrefixBlock], raw: bytes, block: PrefixBlock) -> None:
    global _memo_bytes
    if _memo_bytes + len(raw) > _MEMO_MAX_BYTES:
        for per_encoding in _MEMO.values():
            per_encoding.clear()
        _memo_bytes = 0
    memo[bytes(memoryview(raw))] = block  # an exact copy: orjson's own result keeps its ~16 KB buffer
    _memo_bytes += len(raw)


#: The same, by object: a resent history is last turn's objects (``gateway.sessions.resent``),
#: so most blocks are found without even encoding the message. Values carry the encoding.
_BY_OBJECT: ObjectMemo[tuple[str, bool, PrefixBlock]] = ObjectMemo()


def prefix_blocks(ctx: Context) -> tuple[PrefixBlock, ...]:
    """Split the request into tool and message blocks, in the order the provider reads them."""
    counter: TokenCounter = ctx.env.counter
    encoding = counter.encoding_name
    blocks: list[PrefixBlock] = []
    for i, tool in enumerate(ctx.tools or ()):
        first = i == 0
        found = _BY_OBJECT.get(tool)
        if found is None or found[0] != encoding or found[1] != first:
            rendered = render_tool(tool)
            overhead = TOOLS_OVERHEAD if first else 0
            block = PrefixBlock("tools", _digest(rendered.encode()), overhead + counter.text(rendered))
            found = _BY_OBJECT.put(tool, (encoding, first, block))
        blocks.append(found[2])
    memo = _MEMO.setdefault(encoding, {})
    for message in ctx.messages:
        found = _BY_OBJECT.get(message)
        if found is None or found[0] != encoding:
            raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
            block = memo.get(raw)
            if block is None:
                block = PrefixBlock(component_of(message), _digest(raw), counter.message(message))
                _remember(memo, raw, block)
            found = _BY_OBJECT.put(message, (encoding, False, block))
        blocks.append(found[2])
    return tuple(blocks)


def cacheable_tokens(shared_tokens: int, *, minimum: int = CACHE_MINIMUM, step: int = CACHE_STEP) -> int:
    """Round a shared prefix the way OpenAI bills it: nothing under ``minimum``, else whole steps.

    >>> cacheable_tokens(1023), cacheable_tokens(1024), cacheable_tokens(1300)
    (0, 1024, 1280)
    """
    rounded = (shared_tokens // step) * step
    return rounded if rounded >= minimum else 0


def _label(previous_key: str | None, current: PrefixBlock | None) -> str:
    names = {key.split(":", 1)[0] for key in (previous_key,) if key}
    if current is not None:
        names.add(current.component)
    if "reminder" in names:
        return "reminder"
    known = [n for n in names if n in COMPONENTS]
    return min(known, key=COMPONENTS.index) if known else "history"


def compare_prefix(blocks: Sequence[PrefixBlock], previous: Sequence[str]) -> PrefixReport:
    """Compare this request's blocks with the previous request's keys, in order."""
    shared = 0
    tokens = 0
    for block, key in zip(blocks, previous, strict=False):
        if block.key() != key:
            break
        shared += 1
        tokens += block.tokens
    stable_end = len(previous) - 1 if previous and previous[-1].startswith("reminder:") else len(previous)
    broken = None
    if shared < stable_end:
        current = blocks[shared] if shared < len(blocks) else None
        broken = _label(previous[shared], current)
    return PrefixReport(tuple(blocks), tokens, cacheable_tokens(tokens), broken)


def track_prefix(ctx: Context) -> PrefixReport:
    """Report on the assembled ``ctx`` against ``ctx.session.previous_prefix``."""
    return compare_prefix(prefix_blocks(ctx), ctx.session.previous_prefix)


def prompt_tokens(report: PrefixReport) -> int:
    """The request's prompt tokens from its blocks (equals ``TokenCounter.request``)."""
    return sum(b.tokens for b in report.blocks) + REPLY_PRIMING
