"""Replay mode: answer each request with the real next assistant message of the transcript it continues.

Transcripts are ``agent_loops``-shaped JSONL lines (``{"id", "tools", "messages"}``).
A request is matched on its messages, not its position in the file, so it survives the
gateway's edits: each message is fingerprinted (tool-call ids, tool results, text, and the
head and paragraphs of long system/user texts), the transcript sharing the most fingerprints wins, and
the request's messages are aligned to it in order, so the newest one that survived
compaction says where the conversation is. The answer is the first assistant message
after that point.

When that message calls a tool the request does not offer, a model would search for it:
if the gateway serves ``find_tools`` the simulator calls it with the missing tool's
description. Otherwise (or when it already searched) it answers as the transcript does and
counts a miss, so a benchmark sees what pruning hid.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gateway.providersim.choose_tool import SEARCH_TOOL
from gateway.tokens import content_text

_HEAD = 200


def fingerprints(message: Mapping[str, Any]) -> list[str]:
    """Stable keys of one message that a gateway edit of another message cannot change."""
    role = str(message.get("role") or "")
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        return ["calls:" + ",".join(str(c.get("id")) for c in calls if isinstance(c, Mapping))]
    raw = content_text(message.get("content"))[0]
    text = " ".join(raw.split())
    if not text:
        return []
    if role == "tool":
        return [f"tool:{message.get('tool_call_id')}:" + hashlib.sha1(text.encode()).hexdigest()]
    keys = [f"{role}:" + hashlib.sha1(text.encode()).hexdigest()]
    if role in ("system", "user") and len(text) > _HEAD:
        # The gateway rewrites long prompts (volatile values out, rules restated): the head and
        # each untouched paragraph still say which run this is (the ticket paragraph differs).
        keys.append(f"{role}-head:" + hashlib.sha1(text[:_HEAD].encode()).hexdigest())
        paragraphs = {" ".join(p.split()) for p in raw.split("\n\n")}
        keys += sorted(f"{role}-para:" + hashlib.sha1(p.encode()).hexdigest() for p in paragraphs if len(p) >= 40)
    return keys


@dataclass(slots=True)
class Transcript:
    """One recorded run: its id, the tools it had, its messages and where each fingerprint sits."""

    id: str
    tools: dict[str, str]  # name -> description
    messages: list[dict[str, Any]]
    positions: dict[str, list[int]] = field(default_factory=dict)

    def next_assistant(self, after: int) -> int | None:
        return next((k for k in range(after + 1, len(self.messages)) if self.messages[k]["role"] == "assistant"), None)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What replay answers: the message to send (None: not matched) and how it was decided."""

    message: dict[str, Any] | None
    outcome: str  # "replayed", "find_tools", "miss", "unmatched", "ended"
    transcript: str | None = None
    turn: int | None = None
    missing: tuple[str, ...] = ()


def load_transcripts(path: str | Path) -> list[Transcript]:
    """Read a JSONL file of transcripts and index every message's fingerprints."""
    out: list[Transcript] = []
    for n, line in enumerate(Path(path).read_bytes().splitlines()):
        if not line.strip():
            continue
        row = orjson.loads(line)
        tools = {
            str(t["function"]["name"]): str(t["function"].get("description") or t["function"]["name"])
            for t in row.get("tools") or []
            if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
        }
        t = Transcript(str(row.get("id") or n), tools, list(row["messages"]))
        for i, m in enumerate(t.messages):
            for key in fingerprints(m):
                t.positions.setdefault(key, []).append(i)
        out.append(t)
    return out


def _offered(body: Mapping[str, Any]) -> set[str]:
    return {
        str(t["function"].get("name"))
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
    }


class Replayer:
    """Finds each request's place in the loaded transcripts and keeps the tally of what happened."""

    def __init__(self, transcripts: Iterable[Transcript]) -> None:
        self.transcripts = list(transcripts)
        self.index: dict[str, list[int]] = defaultdict(list)
        for n, t in enumerate(self.transcripts):
            for key in t.positions:
                self.index[key].append(n)
        self.counts: dict[str, int] = defaultdict(int)
        self.misses: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def locate(self, messages: Sequence[Mapping[str, Any]]) -> tuple[Transcript, int, int] | None:
        """The transcript these messages continue, the index of the newest message aligned to it, and
        that message's index in the request."""
        keys = [fingerprints(m) for m in messages]
        votes: dict[int, int] = defaultdict(int)
        for ks in keys:
            for k in ks:  # a whole-text match outvotes a match of the head alone
                for n in set(self.index.get(k, ())):
                    votes[n] += 1
        if not votes:
            return None
        best = min(votes, key=lambda n: (-votes[n], n))
        t = self.transcripts[best]
        pos, at = -1, -1
        for i, ks in enumerate(keys):
            found = [p for k in ks for p in t.positions.get(k, ()) if p > pos]
            if found:
                pos, at = min(found), i
        return t, pos, at

    def answer(self, body: Mapping[str, Any]) -> Verdict:
        """The transcript's next assistant message for this request, rewritten when its tool is hidden."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        where = self.locate(messages)
        if where is None:
            return self._tally(Verdict(None, "unmatched"))
        t, pos, at = where
        k = t.next_assistant(pos)
        if k is None:
            return self._tally(Verdict(None, "ended", t.id, pos))
        real = t.messages[k]
        offered = _offered(body)
        missing = tuple(
            dict.fromkeys(
                str(c["function"]["name"])
                for c in real.get("tool_calls") or []
                if str(c["function"]["name"]) not in offered
            )
        )
        if not missing:
            return self._tally(Verdict(dict(real), "replayed", t.id, k))
        searched = any(
            str((c.get("function") or {}).get("name")) == SEARCH_TOOL
            for m in messages[at + 1 :]
            for c in m.get("tool_calls") or []
        )
        if SEARCH_TOOL in offered and not searched:
            query = t.tools.get(missing[0], missing[0])
            call = {
                "id": f"call_find_{t.id[-8:]}_{k}",
                "type": "function",
                "function": {"name": SEARCH_TOOL, "arguments": orjson.dumps({"query": query}).decode()},
            }
            return self._tally(
                Verdict({"role": "assistant", "content": None, "tool_calls": [call]}, "find_tools", t.id, k, missing)
            )
        return self._tally(Verdict(dict(real), "miss", t.id, k, missing))

    def _tally(self, verdict: Verdict) -> Verdict:
        with self._lock:
            self.counts[verdict.outcome] += 1
            if verdict.outcome == "miss":
                self.misses.append(
                    {"transcript": verdict.transcript, "turn": verdict.turn, "tools": list(verdict.missing)}
                )
        return verdict

    def stats(self) -> dict[str, Any]:
        """The tally as JSON: counts per outcome and every miss (transcript, turn, hidden tools)."""
        with self._lock:
            return {"transcripts": len(self.transcripts), "counts": dict(self.counts), "misses": list(self.misses)}

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.misses.clear()
