"""Where a request's context window goes: tokens per component, share of the window, waste.

Not a pass: it reads the assembled Context and changes nothing. Components, in the
order the report prints them:

- ``system``: the client's system/developer messages;
- ``tools``: the tool definitions as the provider renders them;
- ``history``: every earlier turn (including cleared tool results);
- ``summary``: compacted history (``<summary`` blocks);
- ``documents``: retrieved material (``<documents`` blocks); ``recalled``: passages the gateway recalled
  (``<recalled``, ``<memory`` blocks);
- ``query``: the last user message, the tool results that end the request, and the reply priming;
- ``reminder``: the trailing ``<reminder>``;
- ``reserve``: the generation reserve (``max_completion_tokens``/``max_tokens`` or a default).

The prompt components add up to what the provider bills as ``prompt_tokens`` (times
the model's calibration ratio when its tokenizer is not tiktoken's). A component above
``WASTE_SHARE`` of the used prompt budget is flagged with a concrete suggestion, once
the prompt is large enough (``MIN_TOKENS_TO_FLAG``) for the saving to matter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gateway.assembly.context import Context, Message
from gateway.assembly.message_text import is_system
from gateway.assembly.render_reminder import parse_reminder
from gateway.assembly.verify_assembly import is_gateway_block, last_client_user
from gateway.history_fold import Chunk
from gateway.memos import Memos
from gateway.tokens import REPLY_PRIMING, TokenCounter

COMPONENTS: tuple[str, ...] = (
    "system",
    "tools",
    "history",
    "summary",
    "documents",
    "recalled",
    "query",
    "reminder",
    "reserve",
)
DEFAULT_GENERATION_RESERVE = 4096
WASTE_SHARE = 0.30
MIN_TOKENS_TO_FLAG = 1024  # the smallest prompt a provider caches; below it nothing is worth cutting
SUGGESTIONS: Mapping[str, str] = {
    "system": "move examples and rarely needed instructions out of the system prompt, or into documents",
    "tools": "prune tools: enable prune_tools or lower its tool budget",
    "history": "summarise history: enable compact_history or lower its threshold",
    "summary": "re-compact the summary hierarchically or lower its summary budget",
    "documents": "rerank documents and keep fewer, or chunk them smaller",
    "recalled": "recall fewer passages: lower policy.memory.recall_budget_tokens or max_passages",
    "reminder": "restate fewer rules (lower rules.budget_tokens) or move fewer values to the reminder",
}
_DOCUMENT_MARKERS = ("<documents",)
_RECALLED_MARKERS = ("<recalled", "<memory")  # passages the gateway recalled: labelled as such, not documents


class BudgetLine(NamedTuple):
    """One component's line. A tuple, not a frozen dataclass: a report makes nine, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (2.5-2.7 us a line against 0.9, session 49)."""

    component: str
    tokens: int
    share_of_window: float
    share_of_used: float
    waste: bool = False
    suggestion: str = ""


@dataclass(frozen=True, slots=True)
class BudgetReport:
    model: str
    context_window: int
    prompt_tokens: int
    reserve: int
    scale: float
    lines: tuple[BudgetLine, ...]

    @property
    def fits(self) -> bool:
        return self.prompt_tokens + self.reserve <= self.context_window

    @property
    def waste(self) -> tuple[BudgetLine, ...]:
        return tuple(line for line in self.lines if line.waste)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "context_window": self.context_window,
            "prompt_tokens": self.prompt_tokens,
            "reserve": self.reserve,
            "scale": self.scale,
            "fits": self.fits,
            "components": {
                line.component: {
                    "tokens": line.tokens,
                    "share_of_window": round(line.share_of_window, 4),
                    "share_of_used": round(line.share_of_used, 4),
                    "waste": line.waste,
                    "suggestion": line.suggestion,
                }
                for line in self.lines
            },
        }


def _kind(message: Message) -> str:
    """What a message is by its content alone ("" when its place decides); the gateway's
    ``memos.kinds`` keeps it per message object (a resent history is last turn's objects)."""
    content = message.get("content")
    if message.get("role") == "user" and parse_reminder(content) is not None:
        return "reminder"
    if isinstance(content, str) and content.startswith("<summary"):
        return "summary"
    if isinstance(content, str) and content.startswith(_DOCUMENT_MARKERS):
        return "documents"
    if isinstance(content, str) and content.startswith(_RECALLED_MARKERS):
        return "recalled"
    if is_system(message) and not is_gateway_block(message):
        return "system"
    return ""


def _tokens_by_kind(messages: Sequence[Message], counter: TokenCounter, memos: Memos) -> list[dict[str, int]]:
    """Tokens per content kind ("" counted as history) per chunk of history, per encoding
    (``memos.tokens_by_kind``): a long agent turn counts only its new chunk (``gateway.history_fold``)."""
    kind = memos.kinds.get_or

    def part(chunk: Chunk) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in chunk.messages:
            name = kind(m, _kind) or "history"
            out[name] = out.get(name, 0) + counter.message(m)
        return out

    return memos.tokens_by_kind[counter.encoding_name].parts(messages, part)


def generation_reserve(params: Mapping[str, Any], default: int = DEFAULT_GENERATION_RESERVE) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _trailing_tool_results(messages: tuple[Message, ...]) -> int:
    """Index where the run of tool results ending the messages (before gateway blocks) starts."""
    end = len(messages)
    while end > 0 and is_gateway_block(messages[end - 1]):
        end -= 1
    start = end
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    return start if start < end else len(messages)


def budget_report(
    ctx: Context, *, scale: float = 1.0, default_reserve: int = DEFAULT_GENERATION_RESERVE
) -> BudgetReport:
    """Count each component of the assembled context; flag the ones that waste the window."""
    counter = ctx.env.counter
    tokens = dict.fromkeys(COMPONENTS, 0)
    tokens["tools"] = counter.tools(ctx.tools)
    messages = ctx.messages
    for part in _tokens_by_kind(messages, counter, ctx.env.memos):
        for name, n in part.items():
            tokens[name] += n
    # Those counted as history by content alone but that are the query by their place.
    last_user, tail = last_client_user(messages), _trailing_tool_results(messages)
    for i in (*((last_user,) if 0 <= last_user < tail else ()), *range(tail, len(messages))):
        if not ctx.env.memos.kinds.get_or(messages[i], _kind):
            n = counter.message(messages[i])
            tokens["history"] -= n
            tokens["query"] += n
    tokens["query"] += REPLY_PRIMING
    for name in tokens:
        tokens[name] = round(tokens[name] * scale)
    tokens["reserve"] = generation_reserve(ctx.params, default_reserve)
    used = sum(v for k, v in tokens.items() if k != "reserve")
    window = max(1, ctx.env.context_window)
    lines = []
    for name in COMPONENTS:
        share = tokens[name] / used if used and name != "reserve" else 0.0
        waste = name in SUGGESTIONS and used >= MIN_TOKENS_TO_FLAG and share > WASTE_SHARE
        lines.append(
            BudgetLine(name, tokens[name], tokens[name] / window, share, waste, SUGGESTIONS[name] if waste else "")
        )
    return BudgetReport(ctx.env.model, ctx.env.context_window, used, tokens["reserve"], scale, tuple(lines))
