"""Mask sensitive text (``store.redact`` patterns) in a record before anything is written.

Redaction happens before hashing, so a masked message deduplicates with other masked
copies of itself and the clear text never reaches the database, the spool file or a hash.

``SECRET_PATTERNS`` (provider and cloud keys, tokens, JWTs, private keys) are masked by
default (``store.redact_secrets``): a user pasting a key into a chat must not leave it in
the store in clear. Text without a match is kept as the same object, so a record with no
secret (nearly all of them) is written as it came, JSON bytes included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import orjson

from gateway.history_fold import CHUNK, Chunk, HistoryFold
from gateway.object_memo import ObjectMemo, WeakMemo, same_objects
from gateway.store.record import Forwarded, RequestRecord

MASK = "[REDACTED]"
#: Record fields that hold text a client or a provider wrote.
_TEXT_FIELDS = ("original", "assembled", "decisions", "response", "response_text", "tool_calls", "error", "budget")
#: The request's bodies, the large fields (``RequestRecord.sent``): looked at once per request.
_BODIES = frozenset(("original", "assembled"))
#: The small fields the answer and the counts made after it decide (the decisions' findings aside): the rest of
#: ``_TEXT_FIELDS`` is the forwarded request's own, whose verdict is made once (``_sent_may_hold_secret``).
_ANSWERED_FIELDS = tuple(name for name in _TEXT_FIELDS if name not in _BODIES and name != "decisions")
#: Well-known secret shapes, masked unless ``store.redact_secrets`` is false: each with the
#: literal every match contains, so text without one is skipped at ``str.find`` speed (a
#: regex scan of a 300 KB conversation costs ~100 ms; the literal checks ~0.2 ms).
SECRET_PATTERNS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("sk-",), r"\bsk-(?:proj-|ant-(?:api\d\d-)?|live-|test-)?[A-Za-z0-9_-]{20,}"),  # OpenAI, Anthropic, Stripe
    (("vk-",), r"\bvk-[A-Za-z0-9_-]{20,}"),  # this gateway's own keys
    (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{36,}"),  # GitHub tokens
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    (("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),  # Google API keys
    (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWTs
    (("PRIVATE KEY-----",), r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)
#: Up to this length a text is searched for every secret's literal in one regex pass (a record's small
#: fields: ~2 us against ~7-15 us for fifteen ``in`` checks); a longer one by the ``in`` checks, which
#: are faster there (measured at 8 KB and up).
_ONE_PASS_BYTES = 4096
#: PostgreSQL refuses NUL in ``text`` and ``\u0000`` in ``jsonb``: stored as U+FFFD there instead.
NUL_RULE = (("\x00",), re.compile("\x00"), "\ufffd")


class Redactor:
    """Replace every match of the configured patterns by ``[REDACTED]`` in strings, recursively.

    >>> Redactor([r"[\\w.]+@[\\w.]+"]).text("write to ana@example.com")
    'write to [REDACTED]'
    """

    def __init__(self, patterns: Iterable[str], *, secrets: bool = False, nul_free: bool = False) -> None:
        self.patterns = tuple(re.compile(p) for p in patterns)
        rules = [(markers, re.compile(p), MASK) for markers, p in SECRET_PATTERNS] if secrets else []
        self.secrets: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
            *rules,
            *([NUL_RULE] if nul_free else []),
        )
        # each literal as it appears inside encoded JSON (a NUL is written "\u0000")
        self._markers = tuple(orjson.dumps(m)[1:-1] for markers, _, _ in self.secrets for m in markers)
        # the same literals as one alternation: one pass over a short text instead of fifteen
        self._any_marker = re.compile(b"|".join(map(re.escape, self._markers))) if self._markers else None
        self._clean: ObjectMemo[bool] = ObjectMemo()  # object -> whether it may hold a secret
        # the same per chunk of a list (``gateway.history_fold``): a resent history, and a tool list
        # pruned the same way as last turn, are found again with one look-up per 32 items
        self._chunks: HistoryFold[bool] = HistoryFold(self._scan_chunk)
        # a request's ``Forwarded`` -> whether its bodies may: its record is redacted twice, journaled
        # before the answer and written after it, and the second look at its bodies is free. Held
        # weakly: a ``Forwarded`` carries its bodies' bytes, and an ObjectMemo of 1,000 of them kept
        # up to 1,000 requests' bodies alive (~0.9 MB each at 105K tokens), so every request's buffers
        # came from fresh pages (~220 page faults a request at 105K; RESULTS, session 42).
        self._sent: WeakMemo[Forwarded, bool] = WeakMemo()

    def __bool__(self) -> bool:
        return bool(self.patterns or self.secrets)

    def text(self, value: str) -> str:
        """``value`` with every match masked; the same object when nothing matched."""
        for markers, pattern, replacement in self.secrets:
            if any(m in value for m in markers) and pattern.search(value):
                value = pattern.sub(replacement, value)
        for pattern in self.patterns:
            if pattern.search(value):
                value = pattern.sub(MASK, value)
        return value

    def _may_hold_secret(self, values: list[Any]) -> bool:
        """Whether any secret's literal occurs anywhere in ``values``.

        Scanning a 300 KB conversation for the literals costs ~7 ms here, and an agent resends
        its history every turn: each message (and tool list) is scanned once and the verdict
        kept by identity (``ObjectMemo``), so a turn costs what is new in it."""
        for value in values:
            messages = value.get("messages") if isinstance(value, dict) else None
            if not isinstance(messages, list):
                if self._scan(value):
                    return True
                continue
            tools = value.get("tools")
            rest = {k: v for k, v in value.items() if k not in ("messages", "tools")}
            if self._scan(rest) or (tools is not None and self._scan_items(tools)):
                return True
            if any(self._chunks.parts(messages)) if len(messages) > CHUNK else self._scan_items(messages):
                return True
        return False

    def look_ahead(self, sent: Forwarded) -> None:
        """Decide now whether a forwarded request's bodies may hold a secret. Called while the provider
        works on the request, so the journal written before the client has its answer finds the
        verdict made (a 14K-token agent body's tool list and new messages: ~0.05 ms off the answer)."""
        if not self.patterns and self.secrets:
            self._sent_may_hold_secret(sent)

    def _sent_may_hold_secret(self, sent: Forwarded) -> bool:
        """Whether the forwarded request's bodies or decisions may hold a secret, decided once per request: its
        record is redacted twice (journaled before the answer, written after it), and the verdict may have
        been made ahead (``look_ahead``), so neither encodes the decisions again."""
        known = self._known(sent)
        if known is not None:
            return known
        return self._remember(sent, self._scan(sent.decisions) or self._bodies_may_hold_secret(sent))

    def _known(self, sent: Forwarded) -> bool | None:
        """The verdict already made on ``sent``, if one was (an entry of a dead request with its id is not)."""
        return self._sent.get(sent)

    def _remember(self, sent: Forwarded, verdict: bool) -> bool:
        return self._sent.put(sent, verdict)

    def same_bodies(self, sent: Forwarded, copy: Forwarded) -> None:
        """``copy`` is ``sent`` without its bodies' bytes: it has the verdict already made, if one was."""
        known = self._known(sent)
        if known is not None:
            self._remember(copy, known)

    def _bodies_may_hold_secret(self, sent: Forwarded) -> bool:
        """``_may_hold_secret`` of the request's bodies; short ones are searched in the JSON bytes the
        request carries (one regex pass over a tiny request's 100 bytes, where encoding its dicts again,
        part by part, cost ~20 us a request). Bytes holding a ``\\u`` escape could spell a secret's
        literal in escapes, so they are looked at as decoded values."""
        original, assembled = sent.original_json, sent.assembled_json
        if original is not None and assembled is not None:
            blobs = (original,) if assembled is original or assembled == original else (original, assembled)
            if all(len(b) <= _ONE_PASS_BYTES and b"\\u" not in b for b in blobs):
                return any(self._has_marker(b) for b in blobs)
        return self._may_hold_secret([b for b in (sent.original, sent.assembled) if b is not None])

    def _scan_items(self, value: Any) -> bool:
        """``_scan`` of a list item by item, each verdict kept by identity: a tool list the passes
        pruned or reordered is a new list of the client's tool objects, so only new tools are encoded
        (a marker cannot span two items: none holds the ``,{}`` between them)."""
        if value.__class__ is not list:
            return self._scan(value)
        if len(value) > CHUNK:
            return any(self._chunks.parts(value))
        clean, scan = self._clean.get_or, self._scan
        return any(clean(item, scan) for item in value)

    def _scan_chunk(self, chunk: Chunk) -> bool:
        """Whether any item of ``chunk`` may hold a secret; each item's verdict kept by identity, so a
        chunk with one new message encodes that message only."""
        clean, scan = self._clean.get_or, self._scan
        return any(clean(item, scan) for item in chunk.messages)

    def _scan(self, value: Any) -> bool:
        try:
            blob = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # an integer past 64 bits, say: let the walk decide
            return True
        return self._has_marker(blob)

    def _has_marker(self, blob: bytes) -> bool:
        """Whether any secret's literal occurs in encoded JSON ``blob``."""
        if len(blob) <= _ONE_PASS_BYTES and self._any_marker is not None:
            return self._any_marker.search(blob) is not None
        return any(m in blob for m in self._markers)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) masked; ``value`` itself
        when nothing in it matched."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            pairs = [(self.value(k), self.value(v)) for k, v in value.items()]
            same = all(mk is k and mv is v for (mk, mv), (k, v) in zip(pairs, value.items(), strict=True))
            return value if same else dict(pairs)
        if isinstance(value, list | tuple):
            items = [self.value(v) for v in value]
            return value if same_objects(items, value) else items
        return value

    def sent(self, sent: Forwarded) -> Forwarded:
        """``sent`` with its bodies masked, their JSON bytes dropped; ``sent`` itself when nothing in them
        matched. The journal writes a request's bodies from this while the provider works on it."""
        if not self or (not self.patterns and not self._sent_may_hold_secret(sent)):
            return sent
        masked = {name: self.value(getattr(sent, name)) for name in _BODIES}
        changes = {name: v for name, v in masked.items() if v is not getattr(sent, name)}
        if not changes:
            return sent
        return replace(sent, **changes, original_json=None, assembled_json=None)

    def record(self, record: RequestRecord) -> RequestRecord:
        """A masked copy of ``record``; the record itself is left as it is (the API still uses it)."""
        if not self:
            return record
        if not self.patterns:
            # what the answer and the counts decide, together: one encoding and one look for the literals;
            # the request's own part (bodies, decisions) has its verdict, made once per request
            answered = [getattr(record, name) for name in _ANSWERED_FIELDS]
            answered.append(record.counts.findings)
            if not self._scan([v for v in answered if v]) and not self._sent_may_hold_secret(record.sent):
                return record
        # Each value read once: ``decisions`` is a new list at each read, so ``is`` compares against this one.
        current = {name: getattr(record, name) for name in _TEXT_FIELDS}
        present = {name: v for name, v in current.items() if v is not None}
        masked = {name: self.value(v) for name, v in present.items()}
        changes = {name: v for name, v in masked.items() if v is not present[name]}
        if not changes:
            return record
        # The bodies' JSON bytes are unredacted: drop them, so only the masked dicts travel on.
        return record.changed(**changes, original_json=None, assembled_json=None)
