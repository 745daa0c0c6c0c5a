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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson

from gateway.assembly.context import Context, Message
from gateway.history_fold import CHUNK
from gateway.tokens import REPLY_PRIMING, TOOLS_OVERHEAD, TokenCounter, render_tool

#: Components in layout order. A break is labelled with the earlier of the two components
#: found at the first differing position (a tool removed shows ``tools``, not ``system``).
COMPONENTS: tuple[str, ...] = ("tools", "system", "summary", "documents", "recalled", "history", "reminder")
CACHE_MINIMUM = 1024
CACHE_STEP = 128
_DIGEST_CHARS = 16
_DOCUMENT_MARKERS = ("<documents",)
#: Passages of this conversation (or the caller's memory) the gateway recalled: not documents.
_RECALLED_MARKERS = ("<recalled", "<memory")


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
    #: ``keys()`` and ``component_tokens()`` when the maker had them per chunk (``track_prefix``).
    known_keys: tuple[str, ...] | None = None
    known_components: Mapping[str, int] | None = None

    def keys(self) -> tuple[str, ...]:
        if self.known_keys is not None:
            return self.known_keys
        return tuple(b.key() for b in self.blocks)

    def component_tokens(self) -> dict[str, int]:
        """Prompt tokens per component (the reply priming is not part of any component)."""
        if self.known_components is not None:
            return dict(self.known_components)
        return _components(self.blocks)


def _components(blocks: Iterable[PrefixBlock]) -> dict[str, int]:
    out: dict[str, int] = {}
    for block in blocks:
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
        if content.startswith(_RECALLED_MARKERS):
            return "recalled"
    if message.get("role") in ("system", "developer"):
        return "system"
    return "history"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]


def message_key(message: Message, raw: bytes | None = None) -> str:
    """The key ``message`` has in ``SessionState.previous_prefix`` when a request carried it (``raw``: its
    canonical bytes, when the caller has them)."""
    if raw is None:
        raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    return f"{component_of(message)}:{_digest(raw)}"


@dataclass(frozen=True, slots=True)
class _Part:
    """The blocks of the tools or of one chunk of history, with what a report needs of them."""

    blocks: tuple[PrefixBlock, ...]
    keys: tuple[str, ...]
    tokens: int
    components: dict[str, int]

    @classmethod
    def of(cls, blocks: tuple[PrefixBlock, ...]) -> _Part:
        return cls(blocks, tuple(b.key() for b in blocks), sum(b.tokens for b in blocks), _components(blocks))


def _parts(ctx: Context) -> list[_Part]:
    """The tools' part, then one part per chunk of history, in the order the provider reads them.

    Agents resend their whole history every turn: a message's block is computed once and found
    again by its object (a resent history is last turn's objects, ``gateway.sessions.resent``),
    else by its canonical bytes; per encoding, since tokens depend on it. The memos are the
    gateway's (``ctx.env.memos``); caches, not state: clearing them changes no result.
    """
    counter: TokenCounter = ctx.env.counter
    encoding = counter.encoding_name
    memos = ctx.env.memos
    by_object, by_bytes = memos.prefix_by_object, memos.prefix_by_bytes
    tools: list[PrefixBlock] = []
    for i, tool in enumerate(ctx.tools or ()):
        first = i == 0
        found = by_object.get(tool)
        if found is None or found[0] != encoding or found[1] != first:
            rendered = render_tool(tool)
            overhead = TOOLS_OVERHEAD if first else 0
            block = PrefixBlock("tools", _digest(rendered.encode()), overhead + counter.text(rendered))
            found = by_object.put(tool, (encoding, first, block))
        tools.append(found[2])
    known = by_bytes.for_encoding(encoding)

    def message_block(message: Message) -> PrefixBlock:
        found = by_object.get(message)
        if found is None or found[0] != encoding:
            raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
            block = known.get(raw)
            if block is None:
                block = PrefixBlock(component_of(message), _digest(raw), counter.message(message))
                by_bytes.put(encoding, raw, block)
            found = by_object.put(message, (encoding, False, block))
        return found[2]

    # A chunk of history's part, per encoding: a long agent turn splits only its new chunk (``gateway.history_fold``).
    fold = memos.prefix_parts[encoding]
    chunks = fold.parts(ctx.messages, lambda chunk: _Part.of(tuple(map(message_block, chunk.messages))))
    return [_Part.of(tuple(tools)), *chunks]


def prefix_blocks(ctx: Context) -> tuple[PrefixBlock, ...]:
    """Split the request into tool and message blocks, in the order the provider reads them."""
    return tuple(chain.from_iterable(p.blocks for p in _parts(ctx)))


def cacheable_tokens(shared_tokens: int, *, minimum: int = CACHE_MINIMUM, step: int = CACHE_STEP) -> int:
    """Round a shared prefix the way OpenAI bills it: nothing under ``minimum``, else whole steps.

    >>> cacheable_tokens(1023), cacheable_tokens(1024), cacheable_tokens(1300)
    (0, 1024, 1280)
    """
    rounded = (shared_tokens // step) * step
    return rounded if rounded >= minimum else 0


def _label(previous_key: str | None, current: str | None) -> str:
    """The component a broken prefix is charged to: the previous request's block there, or this one's."""
    names = {key.split(":", 1)[0] for key in (previous_key, current) if key}
    if "reminder" in names:
        return "reminder"
    known = [n for n in names if n in COMPONENTS]
    return min(known, key=COMPONENTS.index) if known else "history"


def compare_prefix(
    blocks: Sequence[PrefixBlock], previous: Sequence[str], parts: Sequence[_Part] | None = None
) -> PrefixReport:
    """Compare this request's blocks with the previous request's keys, in order.

    ``parts`` are the same blocks per chunk (from ``track_prefix``), which spare walking each block.
    """
    keys = tuple(chain.from_iterable(p.keys for p in parts)) if parts is not None else tuple(b.key() for b in blocks)
    shared = _common_length(keys, tuple(previous))
    tokens = _leading_tokens(blocks, parts, shared)
    broken = _broken(keys, previous, shared)
    components: dict[str, int] | None = None
    if parts is not None:
        components = {}
        for part in parts:
            for name, n in part.components.items():
                components[name] = components.get(name, 0) + n
    return PrefixReport(tuple(blocks), tokens, cacheable_tokens(tokens), broken, keys, components)


def _broken(keys: Sequence[str], previous: Sequence[str], shared: int) -> str | None:
    """The component that broke the previous prefix (None if this request kept it: a trailing reminder may change)."""
    stable_end = len(previous) - 1 if previous and previous[-1].startswith("reminder:") else len(previous)
    if shared >= stable_end:
        return None
    return _label(previous[shared], keys[shared] if shared < len(keys) else None)


@dataclass(frozen=True, slots=True)
class PrefixKeys:
    """The assembled request's blocks by name alone, against the session's previous request: what the
    session keeps for the next turn and whether this one broke the prefix. Their tokens (``track_prefix``)
    are figures for the record, counted after the answer: a new round's text is ~0.2 ms to encode."""

    keys: tuple[str, ...]
    break_component: str | None


def prefix_keys(ctx: Context) -> PrefixKeys:
    """``track_prefix(ctx).keys()`` and its ``break_component``, without counting any text."""
    memos = ctx.env.memos
    by_object = memos.prefix_by_object
    encoding = ctx.env.counter.encoding_name
    known = memos.prefix_by_bytes.for_encoding(encoding)

    def tool_key(tool: Message) -> str:
        found = by_object.get(tool)  # a block of any encoding: keys do not depend on it
        return found[2].key() if found is not None else f"tools:{_digest(render_tool(tool).encode())}"

    def key(message: Message) -> str:
        found = by_object.get(message)
        if found is not None:
            return found[2].key()
        raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
        block = known.get(raw)  # a message rebuilt alike each turn (a stub, the reminder): its block is known
        if block is None:
            return message_key(message, raw)
        by_object.put(message, (encoding, False, block))  # as ``_parts`` would: the report after finds it
        return block.key()

    tools = tuple(map(tool_key, ctx.tools or ()))
    chunks = memos.prefix_keys.parts(ctx.messages, lambda chunk: tuple(map(key, chunk.messages)))
    keys = tools + tuple(chain.from_iterable(chunks))
    previous = ctx.session.previous_prefix
    return PrefixKeys(keys, _broken(keys, previous, _common_length(keys, tuple(previous))))


def _common_length(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many leading items ``a`` and ``b`` share; slices compare at C speed (mostly identical strings)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    start = 0
    while a[start : start + CHUNK] == b[start : start + CHUNK]:
        start += CHUNK
    while a[start] == b[start]:
        start += 1
    return start


def _leading_tokens(blocks: Sequence[PrefixBlock], parts: Sequence[_Part] | None, count: int) -> int:
    """Tokens of the first ``count`` blocks: whole parts by their totals, then the rest block by block."""
    tokens = 0
    done = 0
    for part in parts or ():
        if done + len(part.blocks) > count:
            break
        tokens += part.tokens
        done += len(part.blocks)
    return tokens + sum(b.tokens for b in blocks[done:count])


def track_prefix(ctx: Context) -> PrefixReport:
    """Report on the assembled ``ctx`` against ``ctx.session.previous_prefix``."""
    parts = _parts(ctx)
    blocks = tuple(chain.from_iterable(p.blocks for p in parts))
    return compare_prefix(blocks, ctx.session.previous_prefix, parts)


def prompt_tokens(report: PrefixReport) -> int:
    """The request's prompt tokens from its blocks (equals ``TokenCounter.request``)."""
    return sum(b.tokens for b in report.blocks) + REPLY_PRIMING
