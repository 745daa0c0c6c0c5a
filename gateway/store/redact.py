"""Mask sensitive text (``store.redact`` patterns) in a record before anything is written.

Redaction happens before hashing, so a masked message deduplicates with other masked
copies of itself and the clear text never reaches the database, the spool file or a hash.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields, replace
from typing import Any

from gateway.store.record import RequestRecord

MASK = "[REDACTED]"
#: Record fields that hold text a client or a provider wrote.
_TEXT_FIELDS = ("original", "assembled", "decisions", "response", "response_text", "tool_calls", "error", "budget")


class Redactor:
    """Replace every match of the configured patterns by ``[REDACTED]`` in strings, recursively.

    >>> Redactor([r"[\\w.]+@[\\w.]+"]).text("write to ana@example.com")
    'write to [REDACTED]'
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(re.compile(p) for p in patterns)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def text(self, value: str) -> str:
        for pattern in self.patterns:
            value = pattern.sub(MASK, value)
        return value

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def record(self, record: RequestRecord) -> RequestRecord:
        """A masked copy of ``record``; the record itself is left as it is (the API still uses it)."""
        if not self.patterns:
            return record
        names = {f.name for f in fields(record)}
        changes = {name: self.value(getattr(record, name)) for name in _TEXT_FIELDS if name in names}
        # The bodies' JSON bytes are unredacted: drop them, so only the masked dicts travel on.
        return replace(record, **changes, original_json=None, assembled_json=None)
