"""The values the assembly pipeline passes along: Context, Decision, SessionState, Env.

A Context is an immutable view of one chat request. Passes return a new Context
that shares the messages they did not change, and never mutate their input, so
the original request stays available for the final safety check and the log.

Messages and tools are the client's own JSON objects (dicts). They are treated as
read-only: a pass that changes a message builds a new dict.

A Decision is the one record of what a pass did and why. The store, the metrics,
the budget report, the CLI and the UI all read the same record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from gateway.memos import Memos
from gateway.tokens import TokenCounter

Message = Mapping[str, Any]
Tool = Mapping[str, Any]
_NO_PROFILES: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Decision:
    """What one pass did: ``action`` is a short verb phrase, ``reason`` a sentence for people."""

    pass_name: str
    action: str
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.pass_name,
            "action": self.action,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reason": self.reason,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A message range the gateway replaced by a summary, keyed by the hash of that range.

    ``start``/``end`` index the client's original messages (end exclusive). Reusing the
    exact ``summary`` bytes on later turns keeps the provider's prefix cache hitting.
    """

    range_hash: str
    start: int
    end: int
    summary: str
    summarizer: str = "extractive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "range_hash": self.range_hash,
            "start": self.start,
            "end": self.end,
            "summary": self.summary,
            "summarizer": self.summarizer,
        }


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the gateway remembers about one conversation between its turns.

    It is a plain value: passes read it and return a changed copy inside the Context;
    ``sessions/`` persists it (in process, or shared across replicas).
    """

    session_id: str
    turn: int = 0
    volatile_spans: tuple[str, ...] = ()
    previous_system: tuple[str, ...] = ()
    tool_set: tuple[str, ...] = ()
    tool_set_changes: int = 0
    checkpoints: tuple[Checkpoint, ...] = ()
    previous_prefix: tuple[str, ...] = ()  # hashes of the previous assembled blocks, in order
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The stored version this state was loaded at (0: none stored); not part of the state's value,
    #: a save compares it to the stored one so concurrent saves merge instead of overwriting.
    version: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "turn": self.turn,
            "volatile_spans": list(self.volatile_spans),
            "previous_system": list(self.previous_system),
            "tool_set": list(self.tool_set),
            "tool_set_changes": self.tool_set_changes,
            "checkpoints": [c.to_dict() for c in self.checkpoints],
            "previous_prefix": list(self.previous_prefix),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionState:
        return cls(
            session_id=str(data["session_id"]),
            turn=int(data.get("turn", 0)),
            volatile_spans=tuple(data.get("volatile_spans", ())),
            previous_system=tuple(data.get("previous_system", ())),
            tool_set=tuple(data.get("tool_set", ())),
            tool_set_changes=int(data.get("tool_set_changes", 0)),
            checkpoints=tuple(Checkpoint(**c) for c in data.get("checkpoints", ())),
            previous_prefix=tuple(data.get("previous_prefix", ())),
            extra=dict(data.get("extra", {})),
        )


class Summarizer(Protocol):
    """Turn a span of messages into a summary text; injected so passes stay free of I/O.

    ``previous`` is the summary the span continues (hierarchical re-compaction).
    Implementations may fail by raising; the compaction pass falls back to extractive.
    """

    name: str

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str: ...


@dataclass(frozen=True, slots=True)
class SentPrefix:
    """The session's request as the provider last received it, cut where a summarised range ends.

    ``messages[first:]`` are the range (its earlier summary included, if one was sent); what comes
    before is the head. ``cached`` is how many of its tokens the provider holds (predicted from the
    previous request's blocks), ``cache_ratio`` what such a token costs against an uncached one, and
    ``window`` the model's context window: a summariser call that continues this prefix must fit it.
    """

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] | None
    params: Mapping[str, Any]  # the body fields that route the provider's cache (``prompt_cache_key``)
    first: int
    cached: int
    cache_ratio: float
    window: int


@runtime_checkable
class ContinuingSummarizer(Summarizer, Protocol):
    """A summariser that can also write its summary as the continuation of the session's own request.

    ``shares_cache`` says whether its calls reach the provider cache the session's requests fill (the
    same model at the same upstream): only then is the sent prefix a cache hit rather than a longer input.
    """

    shares_cache: bool

    def continued(self, sent: SentPrefix, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        """Summarise ``sent.messages[sent.first:]`` (standing for ``messages``, continuing ``previous``)."""
        ...


@dataclass(frozen=True, slots=True)
class Env:
    """What a pass may consult besides the request and the session: all injected, none global."""

    counter: TokenCounter
    context_window: int
    model: str
    provider: str = "openai"
    now: float = 0.0
    summarizer: Summarizer | None = None
    caller: str = ""  # short hash of the caller's key, never the key
    # Cached input price over input price (litellm model info): what a token in the cached prefix costs
    cache_price_ratio: float = 0.5
    # The local inference engine behind the model (``ModelConfig.engine``) and its slot count
    engine: str | None = None
    engine_slots: int = 1
    # Tool usage profiles as of the request's start (tool_key -> unit vector; read-only snapshot)
    tool_profiles: Mapping[str, Any] = field(default_factory=lambda: _NO_PROFILES)
    # The gateway's caches between requests (``gateway.memos``); fresh ones when built alone
    memos: Memos = field(default_factory=Memos)


@dataclass(frozen=True, slots=True)
class Context:
    """One chat request as the pipeline sees it.

    ``params`` holds every other body field (tool_choice, temperature, unknown extras)
    untouched. ``extensions`` holds Ventana's own request fields (e.g. ``documents``),
    which are removed from what the provider receives. ``reminder`` collects the lines
    passes want rendered in the trailing ``<reminder>`` block; the last pass renders it.
    """

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] | None
    params: Mapping[str, Any]
    env: Env
    session: SessionState
    extensions: Mapping[str, Any] = field(default_factory=dict)
    reminder: tuple[tuple[str, str], ...] = ()  # (kind, text) in render order
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> Context:
        return replace(self, **changes)

    def annotate(self, **values: Any) -> Context:
        return replace(self, annotations={**self.annotations, **values})

    def prompt_tokens(self) -> int:
        return self.env.counter.request(self.messages, self.tools)

    def prompt_tokens_within(self, limit: int) -> bool:
        """``prompt_tokens() <= limit``, with no text encoded when a bound can tell (``request_at_most``)."""
        counter = self.env.counter
        return counter.request_at_most(self.messages, self.tools) <= limit or self.prompt_tokens() <= limit

    def prompt_tokens_below(self, minimum: int) -> bool:
        """``prompt_tokens() < minimum``, with no text encoded when a bound can tell (``request_at_least``)."""
        counter = self.env.counter
        if counter.request_at_least(self.messages, self.tools) >= minimum:
            return False
        return counter.request_at_most(self.messages, self.tools) < minimum or self.prompt_tokens() < minimum

    def body(self) -> dict[str, Any]:
        """The request body to forward: params, then messages and tools as assembled."""
        out = dict(self.params)
        out["messages"] = list(self.messages)
        if self.tools is not None:
            out["tools"] = list(self.tools)
        return out


class Pass(Protocol):
    """A pass: ``(context, policy) -> (context, decisions)``, pure and total.

    The session's state travels in the context (``ctx.session``); state a pass wants kept for
    the next turn is returned in the new context's session, never written anywhere.

    It must not do I/O, must not mutate its inputs, and must not raise for a request
    it can leave alone: it records a Decision instead. A pass with nothing to do
    returns its input Context unchanged (the same object) and no decisions.
    """

    def __call__(self, ctx: Context, policy: Any) -> tuple[Context, list[Decision]]: ...
