"""What one request page opens with: the outcome in numbers and the list of what changed.

A reader of ``/ui/requests/{id}`` wants the answer to "what did the gateway do to this
request" before any message body: tokens original -> sent, the cache share, the cost,
and each change named (tools removed, tool results cleared, ranges summarised, values
moved, passages recalled). Everything here is derived from the stored request and its
decisions, the same records the CLI and the metrics read; nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.store.compaction_lines import compaction_lines
from gateway.store.queries import StoredRequest
from gateway.summariser_share import SummariserShare, split_cost
from gateway.upstream.model_info import ModelInfo

#: Messages longer than this many characters start folded on the request page.
FOLD_CHARS = 1200


@dataclass(frozen=True, slots=True)
class Outcome:
    tokens_original: int
    tokens_sent: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cost_usd: float | None

    @property
    def saved_share(self) -> float:
        return 1 - self.tokens_sent / self.tokens_original if self.tokens_original else 0.0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def share_of(s: Any) -> SummariserShare:
    """The summariser's share of a stored request's (or turn's) billed usage, from its columns."""
    return SummariserShare(
        s.summarizer_model, s.summarizer_prompt_tokens, s.summarizer_cached_tokens, s.summarizer_completion_tokens
    )


def request_cost(s: Any, price: Callable[[str], ModelInfo | None]) -> float | None:
    """A stored request's provider cost: its own tokens at its model's prices, its summariser calls' at the
    summariser model's (``summariser_share``)."""
    return split_cost(s.model, s.prompt_tokens, s.cached_tokens, s.completion_tokens, share_of(s), price)


def outcome(stored: StoredRequest, price: Callable[[str], ModelInfo | None]) -> Outcome:
    s = stored.summary
    return Outcome(
        s.tokens_original,
        s.tokens_assembled,
        s.prompt_tokens,
        s.cached_tokens,
        s.completion_tokens,
        request_cost(s, price),
    )


def tool_names(tools: Any) -> list[str]:
    return [str((t.get("function") or {}).get("name", "?")) for t in tools or () if isinstance(t, Mapping)]


def changes(stored: StoredRequest) -> list[tuple[str, str]]:
    """(kind, sentence) for each thing the gateway changed, in the order a reader asks about them."""
    out: list[tuple[str, str]] = []
    original, sent = tool_names(stored.original.get("tools")), tool_names(stored.assembled.get("tools"))
    removed = [n for n in original if n not in set(sent)]
    if removed:
        out.append(("tools", f"{len(removed)} of {len(original)} tools removed: {', '.join(removed)}"))
    compaction = compaction_lines(stored.decisions)  # one line for the clearing, one per summary
    for d in stored.decisions:
        if removed and d.get("pass") == "prune_tools":
            continue  # the set difference of the two bodies already names the removed tools
        if d.get("pass") in ("clear_tool_results", "compact_history") and compaction:
            out += compaction  # where the first of them was decided
            compaction = []
            continue
        line = _change(d)
        if line is not None:
            out.append(line)
    return out


def _change(d: Mapping[str, Any]) -> tuple[str, str] | None:
    name, action = d.get("pass"), d.get("action")
    detail = d.get("detail") or {}
    saved = int(d.get("tokens_before") or 0) - int(d.get("tokens_after") or 0)
    if name == "prune_tools" and action == "pruned":
        kept = detail.get("kept") or []
        return (
            "tools",
            f"tools restricted to {', '.join(map(str, kept))} ({detail.get('mode')}; list kept for the cache)",
        )
    if name == "move_volatile" and action == "moved":
        spans = ", ".join(f"{s.get('name')}={s.get('text')}" for s in detail.get("spans") or ())
        return ("moved", f"moved to the reminder: {spans}")
    if name == "recall_memory" and action == "recalled":
        return ("recalled", f"passage of turns {detail.get('turns')} recalled ({detail.get('tokens')} tokens)")
    if name == "attach_documents" and action in ("kept", "chunked", "dropped"):
        return ("documents", str(d.get("reason", "")))
    if name == "shrink_oversize" and action == "shrunk":
        return ("shrunk", f"{d.get('reason', '')} ({saved:,} tokens saved)")
    if name == "restate_rules" and action == "restated":
        return ("rules", str(d.get("reason", "")))
    if name == "verify_assembly" and action == "reverted":
        return ("reverted", str(d.get("reason", "")))
    return None


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message as the chat view draws it: role, text parts, images, tool calls."""

    index: int
    role: str
    name: str
    text: str
    images: list[str]
    tool_calls: list[tuple[str, str, str]]  # (id, name, arguments)
    tool_call_id: str | None
    tokens: int

    @property
    def folded(self) -> bool:
        return len(self.text) > FOLD_CHARS


def chat_message(index: int, message: Mapping[str, Any], tokens: int) -> ChatMessage:
    content = message.get("content")
    texts: list[str] = []
    images: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, Sequence):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url":
                url = part.get("image_url")
                images.append(str(url.get("url", "") if isinstance(url, Mapping) else url or ""))
            else:
                texts.append(f"[{part.get('type')}]")
    calls = [
        (
            str(c.get("id", "")),
            str((c.get("function") or {}).get("name", "")),
            str((c.get("function") or {}).get("arguments", "")),
        )
        for c in message.get("tool_calls") or ()
        if isinstance(c, Mapping)
    ]
    return ChatMessage(
        index,
        str(message.get("role", "?")),
        str(message.get("name") or ""),
        "\n".join(texts),
        images,
        calls,
        message.get("tool_call_id"),
        tokens,
    )
