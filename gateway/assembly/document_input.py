"""Read the ``documents`` and ``document_policy`` request extensions into typed values.

A client attaches retrieved material through the SDK's ``extra_body``::

    documents: [{"text": str, "source": str, "fetched_at": "2026-09-23" | ISO datetime | epoch seconds,
                 "score": float (optional)}]
    document_policy: {"max_age_days": 7, "min_score": 0.4, "budget_tokens": 4000, ...}

A malformed field is the client's mistake and answers a 400 that names the offending
key (``documents[2].fetched_at``), the way ``api/validate.py`` names message fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gateway.errors import RequestError

_DAY_S = 86_400.0
P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Document:
    """One retrieved document as the client sent it; ``index`` is its position in the list."""

    index: int
    text: str
    source: str
    fetched_at: str
    fetched_ts: float
    score: float | None = None

    def age_days(self, now: float) -> int:
        """Whole days between the fetch and ``now`` (0 for a fetch dated in the future)."""
        return max(0, int((now - self.fetched_ts) // _DAY_S))


def _fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def parse_timestamp(value: Any, param: str) -> tuple[str, float]:
    """Return the fetch date as written for the model, and as epoch seconds (UTC when no zone)."""
    if isinstance(value, bool):
        raise _fail(f"{param} must be an ISO date, an ISO datetime or epoch seconds, found a boolean", param)
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(float(value), tz=UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z"), float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:
                day = date.fromisoformat(text)
                return text, datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise _fail(f"{param} must be an ISO date or datetime, found {value!r}", param) from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return text, moment.timestamp()
    raise _fail(f"{param} must be an ISO date, an ISO datetime or epoch seconds, found {type(value).__name__}", param)


def _document(item: Any, i: int) -> Document:
    where = f"documents[{i}]"
    if not isinstance(item, Mapping):
        raise _fail(f"{where} must be an object with text, source and fetched_at", where)
    text, source = item.get("text"), item.get("source")
    if not isinstance(text, str):
        raise _fail(f"{where}.text must be a string, found {type(text).__name__}", f"{where}.text")
    if not isinstance(source, str) or not source:
        raise _fail(f"{where}.source must be a non-empty string (the URL or name it came from)", f"{where}.source")
    if "fetched_at" not in item:
        raise _fail(f"{where}.fetched_at is required (when the document was fetched)", f"{where}.fetched_at")
    shown, ts = parse_timestamp(item["fetched_at"], f"{where}.fetched_at")
    score = item.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise _fail(f"{where}.score must be a number when given, found {type(score).__name__}", f"{where}.score")
    return Document(i, text, source, shown, ts, float(score) if score is not None else None)


def parse_documents(value: Any) -> tuple[Document, ...]:
    """Validate the ``documents`` extension; raises a 400 naming the first bad field."""
    if not isinstance(value, list):
        raise _fail(f"'documents' must be an array of objects, found {type(value).__name__}", "documents")
    return tuple(_document(item, i) for i, item in enumerate(value))


def apply_overrides(policy: P, overrides: Any, field: str) -> P:
    """Return ``policy`` with the request's per-call overrides applied and validated."""
    if overrides is None:
        return policy
    if not isinstance(overrides, Mapping):
        raise _fail(f"'{field}' must be an object, found {type(overrides).__name__}", field)
    try:
        return type(policy).model_validate({**policy.model_dump(), **overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise _fail(f"'{field}.{key}': {err['msg']}", f"{field}.{key}") from exc
