"""An older round's assistant message, kept at its edges: its reasoning condensed, its long call arguments stubbed.

Agents that think aloud (mini-swe-agent's model writes up to 1.7K tokens of reasoning before each command)
fill the protected tail with text no pass could touch: the newest four rounds were kept whole whatever
their size, so a compaction landed above its target and the next came a few rounds later (35 rewrites for
a bound of 32 at 8K, 60 for 43 at 6K). ``condense_tail`` condenses the text of the tail's older assistant
messages with this, oldest first, as it clears their results; the newest round stays verbatim.

The same agent writes its test scripts through heredocs (``cat > test_exact.py << 'EOF' ...``): 500-740
tokens of call arguments a round, which stayed whole after the reasoning was condensed and the result
cleared. With ``arguments``, a call whose arguments are ``MIN_ARGUMENT_TOKENS`` or more gets the stub
``clear_tool_inputs`` writes (``input_stubs``: the first characters and the size, valid JSON); its id and
name stay, so its result still answers it. The script was written to a file the agent can read again.

Deterministic (no model call): the first and last ``EDGE_TOKENS`` of the text, on sentence boundaries, in a
``<condensed`` block. The same message gives the same bytes on every turn, so once condensed it stays so
(sticky, by the digest ``verify_assembly`` reads) and the prefix the provider caches does not change back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.assembly.context import Message
from gateway.assembly.input_stubs import input_stub
from gateway.assembly.text_relevance import edges
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.object_memo import ObjectMemo

#: Tokens kept verbatim at each end of the text (the plan it states, the conclusion it reaches).
EDGE_TOKENS = 48
#: Text shorter than this is left as it is: condensing would save too little to be worth a marker.
MIN_REASONING_TOKENS = 240
#: Call arguments shorter than this stay whole (a command line, a path): only scripts and files are stubbed.
MIN_ARGUMENT_TOKENS = 120
NOTE = (
    "The gateway shortened the reasoning of this earlier step to fit the model's context window; "
    "its tool calls keep their ids and names."
)

#: By message object and what was asked (reasoning, arguments): a resent history is last turn's objects.
_MADE: ObjectMemo[dict[tuple[str, bool, bool, frozenset[str]], Message | None]] = ObjectMemo()
#: The client's message each condensed message was made from (``client_message``).
_SOURCE: ObjectMemo[Message] = ObjectMemo()


def condensable(message: Message, count: Any) -> bool:
    """Whether ``message`` is an assistant message whose text is long enough to condense."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, str)
        and not is_gateway_block(message)
        and count.text(content) >= MIN_REASONING_TOKENS
    )


def _long_arguments(call: Any, count: Any, keep: frozenset[str] = frozenset()) -> str | None:
    """The arguments of ``call`` when they are long enough to stub and its tool is not in ``keep``, else None."""
    fn = call.get("function") if isinstance(call, Mapping) else None
    args = fn.get("arguments") if isinstance(fn, Mapping) else None
    if isinstance(fn, Mapping) and fn.get("name") in keep:
        return None
    if not isinstance(args, str) or args.startswith('{"cleared":'):
        return None
    return args if count.text(args) >= MIN_ARGUMENT_TOKENS else None


def has_long_arguments(message: Message, count: Any, keep: frozenset[str] = frozenset()) -> bool:
    """Whether an assistant message carries a call whose arguments ``condensed_reasoning`` would stub
    (``keep``: the ``never_clear`` tools, whose calls keep their arguments as their results stay)."""
    return message.get("role") == "assistant" and any(
        _long_arguments(c, count, keep) is not None for c in message.get("tool_calls") or ()
    )


def condensed_reasoning(
    message: Message, count: Any, *, reasoning: bool = True, arguments: bool = False, keep: frozenset[str] = frozenset()
) -> Message | None:
    """``message`` with its text condensed to its edges (``reasoning``) and its long call arguments stubbed
    (``arguments``, but for tools named in ``keep``), or None when that is not worth a change."""
    key = (str(count.encoding_name), reasoning, arguments, keep)
    found = _MADE.get(message)
    if found is not None and key in found:
        made = found[key]
        if made is not None and _SOURCE.get(made) is None:
            _SOURCE.put(made, message)  # the memo was cleared when full: each turn's reapplying refills it
        return made
    made = _condense(message, count, reasoning, arguments, keep)
    _MADE.put(message, {**(found or {}), key: made})
    if made is not None:
        _SOURCE.put(made, message)
    return made


def client_message(message: Message) -> Message:
    """The client's message ``message`` was condensed from (``message`` itself when it was not).

    A cleared result's stub repeats its call's arguments: read from the condensed call, it would name the
    stub and change on the turn the call was condensed, a rewrite of the prefix for nothing."""
    return _SOURCE.get(message) or message


def _condense(message: Message, count: Any, reasoning: bool, arguments: bool, keep: frozenset[str]) -> Message | None:
    out = dict(message)
    if reasoning and condensable(message, count):
        out["content"] = _condensed_text(str(message.get("content")), count)
    if arguments and has_long_arguments(message, count, keep):
        calls = []
        for call in message.get("tool_calls") or ():
            args = _long_arguments(call, count, keep)
            if args is not None:
                call = {**call, "function": {**call["function"], "arguments": input_stub(args, count.text(args))}}
            calls.append(call)
        out["tool_calls"] = calls
    return out if out != message and count.message(out) < count.message(message) else None


def _condensed_text(text: str, count: Any) -> str:
    size = count.text(text)
    head, _, tail = edges(text, EDGE_TOKENS, count.text)
    omitted = size - count.text(head) - count.text(tail)
    body = f"{head}\n[... {omitted} tokens of reasoning omitted by the gateway ...]\n{tail}"
    return f'<condensed strategy="edges" original_tokens="{size}" note="{NOTE}">\n{body}\n</condensed>'
