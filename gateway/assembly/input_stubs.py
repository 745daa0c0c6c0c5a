"""Shorten the arguments of calls whose results were cleared (``policy.compaction.clear_tool_inputs``).

A coding agent's ``write_file`` or ``apply_patch`` call carries a whole file in its
arguments; once its result is cleared, the arguments are often most of what the round
still costs (Anthropic's ``clear_tool_uses`` offers ``clear_tool_inputs`` for this). The
call keeps its ``id``, ``type`` and ``function.name``, so its result still answers it, and
its arguments become a small JSON object, ``{"cleared": "<the first 80 characters>…",
"tokens": 1234}``: still valid JSON, so litellm's translation into Anthropic's
``tool_use.input`` still parses it. The result's stub already repeats up to 160 characters
of the arguments, so what the call was about stays readable.

The same message and the same cleared ids give equal bytes on every turn (the prefix
stays cacheable); the rewritten message object is remembered per original object, as a
resent history is last turn's objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.assembly.context import Message
from gateway.object_memo import ObjectMemo
from gateway.tokens import TokenCounter

STUB_INPUT_CHARS = 80  # a cleared call keeps at most this much of its arguments
STUB_PREFIX = '{"cleared":'  # how every stubbed argument string starts


def input_stub(arguments: str, tokens: int) -> str:
    """The arguments a cleared call is sent with: a clipped copy and the size removed, as JSON."""
    text = " ".join(arguments.split())
    clipped = text if len(text) <= STUB_INPUT_CHARS else text[: STUB_INPUT_CHARS - 1] + "…"
    return orjson.dumps({"cleared": clipped, "tokens": tokens}).decode()


def _arguments(call: Any) -> str | None:
    fn = call.get("function") if isinstance(call, Mapping) else None
    args = fn.get("arguments") if isinstance(fn, Mapping) else None
    return args if isinstance(args, str) else None


def input_saving(arguments: str, counter: TokenCounter) -> int:
    """Tokens saved by stubbing ``arguments`` (0 when the stub would not be shorter)."""
    tokens = counter.text(arguments)
    return max(0, tokens - counter.text(input_stub(arguments, tokens)))


def with_inputs_cleared(
    message: Message,
    ids: frozenset[str],
    counter: TokenCounter,
    memo: ObjectMemo[tuple[tuple[frozenset[str], str], Message]],
) -> Message:
    """``message`` with the arguments of the calls named by ``ids`` stubbed; the same object when none shrinks.

    ``memo`` (the gateway's ``memos.cleared_inputs``) keeps, per original assistant message, the
    (cleared ids, encoding) it was made with and the message made."""
    made_by = (ids, str(counter.encoding_name))
    found = memo.get(message)
    if found is not None and found[0] == made_by:
        return found[1]
    calls = []
    changed = False
    for call in message.get("tool_calls") or ():
        args = _arguments(call)
        if args is not None and str(call.get("id")) in ids and input_saving(args, counter) > 0:
            stub = input_stub(args, counter.text(args))
            call = {**call, "function": {**call["function"], "arguments": stub}}
            changed = True
        calls.append(call)
    out: Message = {**message, "tool_calls": calls} if changed else message
    return memo.put(message, (made_by, out))[1]


def same_but_arguments(original: Message, sent: Message) -> bool:
    """True when ``sent`` is ``original`` with only some calls' arguments changed (ids, names, order kept)."""
    if original.keys() != sent.keys() or original.get("role") != "assistant":
        return False
    if any(original[k] != sent[k] for k in original if k != "tool_calls"):
        return False
    return same_calls(original, sent, stubs=True)


def same_calls(original: Message, sent: Message, *, stubs: bool) -> bool:
    """True when ``sent`` makes the calls of ``original``: ids, names and order kept, and each call's arguments
    the client's or, with ``stubs``, a stub made here (``input_stub``). No calls on either side is the same."""
    before, after = original.get("tool_calls") or (), sent.get("tool_calls") or ()
    if len(before) != len(after):
        return False
    for a, b in zip(before, after, strict=True):
        if a == b:
            continue
        if not stubs or not (isinstance(a, Mapping) and isinstance(b, Mapping)) or a.keys() != b.keys():
            return False
        if any(a[k] != b[k] for k in a if k != "function"):
            return False
        fa, fb = a.get("function"), b.get("function")
        if not (isinstance(fa, Mapping) and isinstance(fb, Mapping)) or fa.get("name") != fb.get("name"):
            return False
        if fa != fb and (fa.keys() != fb.keys() or not str(fb.get("arguments")).startswith(STUB_PREFIX)):
            return False  # only a stub made here may stand for the client's arguments
    return True
