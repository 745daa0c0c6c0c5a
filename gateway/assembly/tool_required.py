"""The tools a selection must keep whatever their score: named, allowed, called or pinned.

A tool the history called is part of the task's state (the model may call it again, and a
provider rejects a history naming a tool it is not offered on some APIs); a tool named by
``tool_choice`` is one the client demands. Both survive any pruning. So does a tool the newest
user message names or describes (``described_names``): the user asked for it on this request, and
``find_tools`` is for what selection missed, not for what the user spelled out (issue 34: "please
open a tracker issue describing the flaky test" was offered only ``find_tools``, not
``create_issue``, "Open an issue in the project tracker.").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.assembly.context import Context, Message, Tool
from gateway.assembly.message_text import system_indices
from gateway.assembly.tool_scoring import tool_name
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.history_fold import CHUNK, HistoryFold, union
from gateway.tokens import content_text


def required_names(ctx: Context, pinned: Sequence[str], tools: Sequence[Tool], names: Sequence[str]) -> set[str]:
    """Names that must survive whatever their score."""
    required = set(pinned) | _chosen_names(ctx.params.get("tool_choice")) | called_names(ctx.messages)
    required |= {tool_name(t) for t in tools if not isinstance(t.get("function"), Mapping)}
    return required & set(names)


def _chosen_names(choice: Any) -> set[str]:
    if not isinstance(choice, Mapping):
        return set()
    kind = choice.get("type")
    if kind == "function" and isinstance(choice.get("function"), Mapping):
        return {str(choice["function"].get("name"))}
    if kind == "custom" and isinstance(choice.get("custom"), Mapping):
        return {str(choice["custom"].get("name"))}
    if kind == "allowed_tools" and isinstance(choice.get("allowed_tools"), Mapping):
        return {tool_name(t) for t in choice["allowed_tools"].get("tools") or () if isinstance(t, Mapping)}
    return set()


#: dict first: parsed JSON is always dicts, and an ABC isinstance check costs ~10x more.
_MAP = (dict, Mapping)


def called_names(messages: Sequence[Message]) -> frozenset[str]:
    """Every tool name the history called; remembered per chunk (``gateway.history_fold``)."""
    if len(messages) <= CHUNK:
        return _called_in(messages)
    return union(_CALLED.parts(messages))


def _called_in(messages: Sequence[Message]) -> frozenset[str]:
    called: set[str] = set()
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            continue
        for call in calls:
            fn = call.get("function") if isinstance(call, _MAP) else None
            if isinstance(fn, _MAP) and fn.get("name"):
                called.add(str(fn["name"]))
    return frozenset(called)


_CALLED: HistoryFold[frozenset[str]] = HistoryFold(lambda chunk: _called_in(chunk.messages))


#: Share of a description's content words the user's message must contain for the tool to count as
#: described (and at least ``DESCRIBED_MIN_WORDS`` of them): a request in the user's own words, not a
#: passing mention of one common word.
DESCRIBED_SHARE = 0.6
DESCRIBED_MIN_WORDS = 2
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "with",
        "from",
        "by",
        "into",
        "as",
        "at",
        "is",
        "are",
        "be",
        "this",
        "that",
        "its",
        "it",
        "your",
        "you",
        "all",
        "any",
        "file",
        "files",
        "optionally",
    ]
)
_WORD = re.compile(r"[a-z][a-z0-9]+")


def _stems(text: str) -> set[str]:
    """Content words cut to five letters, so 'tracker'/'track' and 'issues'/'issue' meet."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOP}


def _says(text: str, name: str) -> bool:
    """``name`` as whole words of ``text``: "tail" is not said by "detailed", nor "cat" by "locate"."""
    return name in text and re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def described_names(messages: Sequence[Message], tools: Sequence[Tool]) -> set[str]:
    """Tools the newest user message names (``create_issue``, "create issue") or describes.

    Only when the request ends with a message the user wrote (a new instruction; a tool round keeps
    the set as it is). Described: at least ``DESCRIBED_SHARE`` of the content words of the tool's
    description, and at least ``DESCRIBED_MIN_WORDS`` of them, are in the message.
    """
    if not messages or messages[-1].get("role") != "user" or is_gateway_block(messages[-1]):
        return set()
    text = content_text(messages[-1].get("content"))[0]
    if not text:
        return set()
    lowered = text.lower()
    said = _stems(text)
    out: set[str] = set()
    for tool in tools:
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            continue
        name = str(fn.get("name") or "")
        spaced = name.replace("_", " ").replace("-", " ").lower()
        if name and (_says(lowered, name.lower()) or (" " in spaced and _says(lowered, spaced))):
            out.add(name)
            continue
        words = _stems(str(fn.get("description") or ""))
        hits = len(words & said)
        if words and hits >= DESCRIBED_MIN_WORDS and hits / len(words) >= DESCRIBED_SHARE:
            out.add(name)
    return out


#: A name that is one plain word ("Finish", "search") counts only as the manual quotes or calls it:
#: ``"Finish"``, `` `search` ``, ``Finish(`` (else "finish the task" would name it).
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*")


def system_named(messages: Sequence[Message], names: Sequence[str]) -> set[str]:
    """Offered tools the system prompt names as tools: the client's manual says the model will call them.

    ToolBench's prompt says 'ALWAYS call "Finish" function at the end of the task'; a selection
    scored on the task alone misses ``Finish`` and the session searches for it at its last step.
    An identifier-like name (``get_details_by_id``, ``createIssue``) counts wherever it stands as a
    whole word; a plain word only quoted or followed by ``(``.
    """
    system = "\n".join(content_text(messages[i].get("content"))[0] for i in system_indices(messages))
    if not system:
        return set()
    out: set[str] = set()
    for name in names:
        if not name or name not in system:
            continue
        escaped = re.escape(name)
        if _PLAIN_WORD.fullmatch(name):
            pattern = rf"[\"'`]{escaped}[\"'`]|(?<![\w.]){escaped}\("
        else:
            pattern = rf"(?<![\w.]){escaped}(?!\w)"
        if re.search(pattern, system):
            out.add(name)
    return out
