"""The record of one chat request: what the client sent, what the model saw, what came back.

Built by the API layer, handed to a Recorder without waiting, persisted by ``store/``.
Never holds an Authorization header or any key: ``caller`` is a short hash of the key.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Protocol

from gateway.decision_tally import billed_usage
from gateway.upstream.usage import Usage

#: The front doors a request can come through, as stored in ``requests.route``; ``refused`` bodies
#: carry the door they were refused at too.
ROUTES = ("chat", "responses", "messages")


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weak: the redactor's verdict must not keep it alive
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
    prefix_break: str | None = None
    replay_of: str | None = None  # the recorded request this one sends again (``ventana replay send``)
    route: str = "chat"
    original_json: bytes | None = field(default=None, repr=False)
    assembled_json: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Counts:
    """The bookkeeping made after the answer: prompt tokens before and after assembly, the budget
    report, lint findings (decisions, when lint only reports) and the prefix's tokens (what the
    provider should read from its cache, the prompt per component)."""

    tokens_original: int = 0
    tokens_assembled: int = 0
    budget: dict[str, Any] | None = None
    findings: tuple[dict[str, Any], ...] = ()
    predicted_cached_tokens: int = 0
    component_tokens: dict[str, int] = field(default_factory=dict)


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


#: The record's stored values by name, in the order the spool and the JSONL log write them. Each
#: is one stage's field (``decisions`` joins the sent request's and the counted lint findings).
FLAT_FIELDS: tuple[str, ...] = (
    "request_id",
    "session_id",
    "created_at",
    "model",
    "provider",
    "caller",
    "original",
    "assembled",
    "decisions",
    "stream",
    "response",
    "response_text",
    "finish_reason",
    "tool_calls",
    "usage",
    "tokens_original",
    "tokens_assembled",
    "overhead_ms",
    "ttfb_ms",
    "total_ms",
    "status",
    "error",
    "replay_of",
    "turn",
    "budget",
    "predicted_cached_tokens",
    "prefix_break",
    "component_tokens",
    "route",
    "original_json",
    "assembled_json",
)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as stored, composed of what each step of the request path returned.

    Built once, when the request is over (``request_record``): nothing fills it in piece by piece.
    Its stored values read as attributes under their column names (``record.status``,
    ``record.usage``), each one stage's field; ``of`` and ``changed`` take them by the same names.
    """

    sent: Forwarded
    counts: Counts = field(default_factory=lambda: Counts())
    answer: Answer = field(default_factory=lambda: Answer())
    outcome: Outcome = field(default_factory=lambda: Outcome())

    @classmethod
    def of(cls, **values: Any) -> RequestRecord:
        """A record from its stored values by name (a spooled line, a fixture); unknown names raise."""
        parts = _by_stage(values)
        return cls(
            Forwarded(**parts["sent"]),
            Counts(**parts["counts"]),
            Answer(**parts["answer"]),
            Outcome(**parts["outcome"]),
        )

    def changed(self, **values: Any) -> RequestRecord:
        """A copy with some stored values replaced by name, as ``dataclasses.replace`` would on a flat record."""
        parts = _by_stage(values)
        counts = self.counts
        if "decisions" in values:  # the given list is the whole of it: the findings are in it already
            counts = replace(counts, findings=())
        return RequestRecord(
            replace(self.sent, **parts["sent"]) if parts["sent"] else self.sent,
            replace(counts, **parts["counts"]) if parts["counts"] else counts,
            replace(self.answer, **parts["answer"]) if parts["answer"] else self.answer,
            replace(self.outcome, **parts["outcome"]) if parts["outcome"] else self.outcome,
        )

    @property
    def request_id(self) -> str:
        return self.sent.request_id

    @property
    def session_id(self) -> str:
        return self.sent.session_id

    @property
    def created_at(self) -> float:
        return self.sent.created_at

    @property
    def model(self) -> str:
        return self.sent.model

    @property
    def provider(self) -> str:
        return self.sent.provider

    @property
    def caller(self) -> str:
        return self.sent.caller

    @property
    def original(self) -> dict[str, Any]:
        return self.sent.original

    @property
    def assembled(self) -> dict[str, Any]:
        return self.sent.assembled

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The passes' and edges' decisions, then the lint findings counted after the answer (a new list)."""
        return [*self.sent.decisions, *self.counts.findings]

    @property
    def stream(self) -> bool:
        return self.sent.stream

    @property
    def response(self) -> dict[str, Any] | None:
        return self.answer.response

    @property
    def response_text(self) -> str | None:
        return self.answer.response_text

    @property
    def finish_reason(self) -> str | None:
        return self.answer.finish_reason

    @property
    def tool_calls(self) -> list[dict[str, Any]] | None:
        return self.answer.tool_calls

    @property
    def usage(self) -> Usage:
        return self.answer.usage

    @property
    def tokens_original(self) -> int:
        return self.counts.tokens_original

    @property
    def tokens_assembled(self) -> int:
        return self.counts.tokens_assembled

    @property
    def overhead_ms(self) -> float:
        return self.outcome.overhead_ms

    @property
    def ttfb_ms(self) -> float | None:
        return self.outcome.ttfb_ms

    @property
    def total_ms(self) -> float:
        return self.outcome.total_ms

    @property
    def status(self) -> int:
        return self.outcome.status

    @property
    def error(self) -> str | None:
        return self.outcome.error

    @property
    def replay_of(self) -> str | None:
        return self.sent.replay_of

    @property
    def turn(self) -> int:
        return self.sent.turn

    @property
    def budget(self) -> dict[str, Any] | None:
        return self.counts.budget

    @property
    def predicted_cached_tokens(self) -> int:
        return self.counts.predicted_cached_tokens

    @property
    def prefix_break(self) -> str | None:
        return self.sent.prefix_break

    @property
    def component_tokens(self) -> dict[str, int]:
        return self.counts.component_tokens

    @property
    def route(self) -> str:
        return self.sent.route

    @property
    def original_json(self) -> bytes | None:
        return self.sent.original_json

    @property
    def assembled_json(self) -> bytes | None:
        return self.sent.assembled_json


#: Which stage holds each stored value.
_STAGE_OF: dict[str, str] = {
    **{f.name: "sent" for f in fields(Forwarded)},
    **{f.name: "counts" for f in fields(Counts) if f.name != "findings"},
    **{f.name: "answer" for f in fields(Answer)},
    **{f.name: "outcome" for f in fields(Outcome)},
}


def _by_stage(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    parts: dict[str, dict[str, Any]] = {"sent": {}, "counts": {}, "answer": {}, "outcome": {}}
    for name, value in values.items():
        stage = _STAGE_OF.get(name)
        if stage is None:
            raise TypeError(f"RequestRecord has no stored value {name!r}; expected one of {', '.join(FLAT_FIELDS)}")
        parts[stage][name] = tuple(value) if name == "decisions" else value
    return parts


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
        Forwarded(request_id, session_id, created_at, model, "", caller, {}, {}, route=route),
        outcome=Outcome(status=status, error=reason),
    )


def request_record(sent: Forwarded, counts: Counts, answer: Answer, outcome: Outcome) -> RequestRecord:
    """The record of one request, combined from what each step returned."""
    # the summariser's calls are the request's too (decision_tally.billed_usage); most requests make none,
    # and their answer is kept as it is: a copy was a dataclass replace twice a request, once before the answer
    billed = billed_usage(answer.usage, sent.decisions)
    return RequestRecord(sent, counts, answer if billed is answer.usage else replace(answer, usage=billed), outcome)


#: Fields that are not part of a record's content (transient bytes; the dicts hold the same).
TRANSIENT_FIELDS = ("original_json", "assembled_json")


def record_dict(record: RequestRecord) -> dict[str, Any]:
    """The record as plain data for JSON (spool, JSONL log), without its transient bytes: its stored
    values by name, flat, as they were before the record was composed of its stages."""
    stages = {
        "sent": asdict(record.sent),
        "counts": asdict(record.counts),
        "answer": asdict(record.answer),
        "outcome": asdict(record.outcome),
    }
    data = {
        name: [*stages["sent"]["decisions"], *stages["counts"]["findings"]]
        if name == "decisions"
        else stages[_STAGE_OF[name]][name]
        for name in FLAT_FIELDS
    }
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

    def look_ahead(self, sent: Forwarded) -> None:
        """Do now what ``sent``'s record will need, while the provider works on it (the loop turn after it
        was sent): whatever the journal before the answer would otherwise do on the client's time."""
        ...

    def journal(self, record: RequestRecord) -> None:
        """Make ``record`` survive a kill of this process now, before the client has the end of its
        answer; ``record`` follows later with the request's full record (see store/journal.py)."""
        ...

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

    def look_ahead(self, sent: Forwarded) -> None:
        return None  # nothing is journaled

    def journal(self, record: RequestRecord) -> None:
        return None  # memory dies with the process anyway

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
