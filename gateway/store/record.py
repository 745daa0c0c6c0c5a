"""The record of one chat request: what the client sent, what the model saw, what came back.

Built by the API layer, handed to a Recorder without waiting, persisted by ``store/``.
Never holds an Authorization header or any key: ``caller`` is a short hash of the key.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gateway.decision_tally import billed_usage
from gateway.upstream.usage import Usage

#: The front doors a request can come through, as stored in ``requests.route``; ``refused`` bodies
#: carry the door they were refused at too.
ROUTES = ("chat", "responses", "messages")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as stored. Built once, when the request is over, by ``request_record`` from
    what each step of the request path returned (``Forwarded``, ``Counts``, ``Answer``)."""

    request_id: str
    session_id: str
    created_at: float
    model: str
    provider: str
    caller: str
    original: dict[str, Any]
    assembled: dict[str, Any]
    decisions: list[dict[str, Any]] = field(default_factory=list)
    stream: bool = False
    response: dict[str, Any] | None = None
    response_text: str | None = None
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: Usage = field(default_factory=Usage)
    tokens_original: int = 0
    tokens_assembled: int = 0
    overhead_ms: float = 0.0
    ttfb_ms: float | None = None
    total_ms: float = 0.0
    status: int = 200
    error: str | None = None
    replay_of: str | None = None
    turn: int = 0
    budget: dict[str, Any] | None = None
    predicted_cached_tokens: int = 0  # the gateway's own cache prediction (assembly/prefix.py)
    prefix_break: str | None = None  # component that broke the session's previous prefix, if any
    component_tokens: dict[str, int] = field(default_factory=dict)  # assembled prompt tokens by component
    route: str = "chat"  # the front door the client used: chat, responses or messages (``ROUTES``)
    # Transient, never stored: the two bodies as the JSON bytes the gateway already had (the
    # client's request, the body sent upstream). The store's writer process parses these
    # instead of receiving the dicts pickled, which would cost the request path's GIL time.
    original_json: bytes | None = field(default=None, repr=False)
    assembled_json: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Forwarded:
    """What is known once the request is forwarded: who sent what, what the provider was sent, and why.

    The loop answering the gateway's own tools returns a new one when it sent the provider another body."""

    request_id: str
    session_id: str
    created_at: float
    model: str
    provider: str
    caller: str
    original: dict[str, Any]
    assembled: dict[str, Any]
    decisions: tuple[dict[str, Any], ...] = ()
    stream: bool = False
    turn: int = 0
    predicted_cached_tokens: int = 0
    prefix_break: str | None = None
    component_tokens: dict[str, int] = field(default_factory=dict)
    replay_of: str | None = None  # the recorded request this one sends again (``ventana replay send``)
    route: str = "chat"
    original_json: bytes | None = field(default=None, repr=False)
    assembled_json: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Counts:
    """The bookkeeping made after the answer: prompt tokens before and after assembly, the budget
    report, and lint findings (decisions, when lint only reports)."""

    tokens_original: int = 0
    tokens_assembled: int = 0
    budget: dict[str, Any] | None = None
    findings: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    """What the provider answered: its body (non-streamed only), text, tool calls, finish reason, usage."""

    response: dict[str, Any] | None = None
    response_text: str | None = None
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def of_completion(cls, data: dict[str, Any], usage: Usage) -> Answer:
        """The answer of a non-streamed completion ``data`` whose usage normalises to ``usage``."""
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        return cls(data, message.get("content"), choice.get("finish_reason"), message.get("tool_calls"), usage)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the request ended: its status and error, and the times it took (ms from arrival)."""

    status: int = 200
    error: str | None = None
    overhead_ms: float = 0.0  # before the provider was called
    ttfb_ms: float | None = None  # the provider's time to its first byte, after the overhead
    total_ms: float = 0.0


def refusal_record(
    request_id: str,
    *,
    caller: str,
    route: str,
    status: int,
    reason: str,
    created_at: float,
    session_id: str = "",
    model: str = "",
) -> RequestRecord:
    """The record of a request the gateway refused before forwarding (auth, rate limit, bad input,
    body too large, unknown model): who, at which door, the status and the reason, and no body, so
    a client holding the request id finds it in ``ventana logs`` and ``/ui``."""
    return RequestRecord(
        request_id=request_id,
        session_id=session_id,
        created_at=created_at,
        model=model,
        provider="",
        caller=caller,
        original={},
        assembled={},
        status=status,
        error=reason,
        route=route,
    )


def request_record(sent: Forwarded, counts: Counts, answer: Answer, outcome: Outcome) -> RequestRecord:
    """The record of one request, combined from what each step returned."""
    return RequestRecord(
        request_id=sent.request_id,
        session_id=sent.session_id,
        created_at=sent.created_at,
        model=sent.model,
        provider=sent.provider,
        caller=sent.caller,
        original=sent.original,
        assembled=sent.assembled,
        decisions=[*sent.decisions, *counts.findings],
        stream=sent.stream,
        response=answer.response,
        response_text=answer.response_text,
        finish_reason=answer.finish_reason,
        tool_calls=answer.tool_calls,
        usage=billed_usage(answer.usage, sent.decisions),  # the summariser's calls are the request's too
        tokens_original=counts.tokens_original,
        tokens_assembled=counts.tokens_assembled,
        overhead_ms=outcome.overhead_ms,
        ttfb_ms=outcome.ttfb_ms,
        total_ms=outcome.total_ms,
        status=outcome.status,
        error=outcome.error,
        replay_of=sent.replay_of,
        turn=sent.turn,
        budget=counts.budget,
        predicted_cached_tokens=sent.predicted_cached_tokens,
        prefix_break=sent.prefix_break,
        component_tokens=sent.component_tokens,
        route=sent.route,
        original_json=sent.original_json,
        assembled_json=sent.assembled_json,
    )


#: Fields that are not part of a record's content (transient bytes; the dicts hold the same).
TRANSIENT_FIELDS = ("original_json", "assembled_json")


def record_dict(record: RequestRecord) -> dict[str, Any]:
    """The record as plain data for JSON (spool, JSONL log), without its transient bytes."""
    data = asdict(record)
    for name in TRANSIENT_FIELDS:
        data.pop(name, None)
    return data


class Recorder(Protocol):
    """Accept a record without blocking the request; persistence happens elsewhere."""

    #: Whether records should carry their bodies' JSON bytes (a writer process parses them).
    wants_json: bool
    #: Whether records go to the gateway's database: memory's recall is on by default only then,
    #: since without it the archive would be the only copy of what users said.
    stored: bool

    def record(self, record: RequestRecord) -> None: ...

    async def room(self) -> None:
        """Return once the recorder can take another request's record without growing unbounded.

        Awaited before a request is served: a store that falls behind slows clients down
        instead of holding thousands of records in memory or dropping them.
        """
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def ready(self) -> bool: ...

    def status(self) -> dict[str, Any]:
        """Numbers for /readyz: at least ``queue_depth``, ``written``, ``spooled``, ``dropped``."""
        ...


#: Records a MemoryRecorder keeps: a served gateway without a store must not grow forever
#: (each record holds the parsed request, ~10x its JSON size for an agent's history).
DEFAULT_MEMORY_RECORDS = 256


class MemoryRecorder:
    """Keeps the latest records in memory: for tests of the API layer and for runs without a store."""

    wants_json = False
    stored = False

    def __init__(self, *, max_records: int = DEFAULT_MEMORY_RECORDS) -> None:
        self.records: deque[RequestRecord] = deque(maxlen=max_records)

    def record(self, record: RequestRecord) -> None:
        self.records.append(record)

    async def room(self) -> None:
        return None

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def ready(self) -> bool:
        return True

    def status(self) -> dict[str, Any]:
        return {"database": "memory", "queue_depth": 0, "written": len(self.records), "spooled": 0, "dropped": 0}
