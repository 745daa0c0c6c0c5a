"""The text of an older round's assistant message, kept at its edges: its reasoning condensed, its calls whole.

Agents that think aloud (mini-swe-agent's model writes up to 1.7K tokens of reasoning before each command)
fill the protected tail with text no pass could touch: the newest four rounds were kept whole whatever
their size, so a compaction landed above its target and the next came a few rounds later (35 rewrites for
a bound of 32 at 8K, 60 for 43 at 6K). ``condense_tail`` condenses the text of the tail's older assistant
messages with this, oldest first, as it clears their results; the newest round stays verbatim.

Deterministic (no model call): the first and last ``EDGE_TOKENS`` of the text, on sentence boundaries, in a
``<condensed`` block. The same message gives the same bytes on every turn, so once condensed it stays so
(sticky, by the digest ``verify_assembly`` reads) and the prefix the provider caches does not change back.
The tool calls, their ids and arguments are untouched, so every call keeps its result.
"""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Message
from gateway.assembly.text_relevance import edges
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.object_memo import ObjectMemo

#: Tokens kept verbatim at each end of the text (the plan it states, the conclusion it reaches).
EDGE_TOKENS = 48
#: Text shorter than this is left as it is: condensing would save too little to be worth a marker.
MIN_REASONING_TOKENS = 240
NOTE = (
    "The gateway shortened the reasoning of this earlier step to fit the model's context window; "
    "its tool calls are unchanged."
)
#: What a condensed message costs at most, for planning (``compaction_layout.landing_floor``).
CONDENSED_ESTIMATE_TOKENS = 2 * EDGE_TOKENS + 64

#: By message object: a resent history is last turn's objects, condensed once.
_MADE: ObjectMemo[tuple[str, Message | None]] = ObjectMemo()


def condensable(message: Message, count: Any) -> bool:
    """Whether ``message`` is an assistant message whose text is long enough to condense."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, str)
        and not is_gateway_block(message)
        and count.text(content) >= MIN_REASONING_TOKENS
    )


def condensed_reasoning(message: Message, count: Any) -> Message | None:
    """``message`` with its text condensed to its edges, or None when it is not worth condensing."""
    found = _MADE.get(message)
    if found is not None and found[0] == count.encoding_name:
        return found[1]
    made = _condense(message, count) if condensable(message, count) else None
    _MADE.put(message, (count.encoding_name, made))
    return made


def _condense(message: Message, count: Any) -> Message | None:
    text = str(message.get("content"))
    size = count.text(text)
    head, _, tail = edges(text, EDGE_TOKENS, count.text)
    omitted = size - count.text(head) - count.text(tail)
    body = f"{head}\n[... {omitted} tokens of reasoning omitted by the gateway ...]\n{tail}"
    out = {
        **message,
        "content": f'<condensed strategy="edges" original_tokens="{size}" note="{NOTE}">\n{body}\n</condensed>',
    }
    return out if count.message(out) < count.message(message) else None
