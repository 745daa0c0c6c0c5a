"""Decide which offered tools a model would call now, the way a real one behaves in an agent loop.

The latest need is the newest user message. A tool "clearly matches" it when a word of
the need names the tool or two words appear in its description. Under ``auto`` the
simulator calls the clear matches it has not called since that message (two at once
when parallel calls are allowed), and once their results are in it answers in text, so
every loop ends. When nothing offered fits a need of two or more content words but the
gateway serves ``find_tools``, the model searches with the need as ``query`` (once per
need), as a model asks for a tool it cannot see. When the gateway serves ``recall_archive``
(recall's tool mode) and the need is a question most of whose content words appear nowhere
else in the request, the model asks the archive first (once per need), as a model asks for
what it was told but no longer sees. ``required`` always calls the best match;
a named ``tool_choice`` calls that tool. Deterministic: the same request gives the same calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.providersim.file_task import plan_file_task
from gateway.providersim.schema_values import conversation_facts, mapping, safe_value_for
from gateway.tokens import content_text

CLEAR = 2
#: The gateway-served tool search (tool selection issue): one required string parameter, ``query``.
SEARCH_TOOL = "find_tools"
#: The gateway-served recall tool (summaries issue, ``policy.memory.mode: tool``): one string ``query``.
RECALL_TOOL = "recall_archive"
_NAME_WEIGHT = 2
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP_WORDS = (
    "a an the and or but if then than that this these those there here what which who whom whose when "
    "where why how is are was were be been being am do does did done have has had having can could would "
    "should will shall may might must to of in on at by for from with without about into onto over under "
    "as it its i me my we our you your he she they them their his her please thanks thank tell give show "
    "make let get set use using used tool tools call now also just some any all each every more most "
    "other such not no yes ok okay want need like know see go going one two first next last new"
)
_STOP = frozenset(_STOP_WORDS.split())
_CLIENT_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
#: Tool-calling turns the model makes for one need before it answers in text: an agent client offering
#: dozens of tools (each a partial word match) must still see every loop end.
MAX_TOOL_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class ToolPick:
    """One call the simulated model makes: the function's name and its arguments."""

    name: str
    arguments: dict[str, Any]


def _stem(word: str) -> str:
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


#: ``text -> its stems``: tool names and descriptions, and a resent history's messages, are the same
#: texts every request; stemming them again was a third of the simulator's CPU on a 14K-token agent
#: request (the benchmarks' upstream shares the machine's cores with the gateway it measures).
_WORDS: dict[str, frozenset[str]] = {}
_WORDS_LIMIT = 20_000


def words(text: str) -> frozenset[str]:
    """Content-word stems of ``text`` (camelCase and snake_case split, stop words dropped)."""
    found = _WORDS.get(text)
    if found is None:
        out: set[str] = set()
        for raw in _WORD.findall(_CAMEL.sub(" ", text).replace("_", " ")):
            if raw.lower() not in _STOP and len(raw) > 2:
                out.add(_stem(raw))
        if len(_WORDS) >= _WORDS_LIMIT:
            _WORDS.clear()
        found = _WORDS[text] = frozenset(out)
    return found


def score(need: frozenset[str], fn: Mapping[str, Any]) -> int:
    """How strongly a need points at a function: 2 per word of its name, 1 per word of its description."""
    name = words(str(fn.get("name") or ""))
    description = words(str(fn.get("description") or ""))
    return sum(_NAME_WEIGHT if w in name else 1 if w in description else 0 for w in need)


def first_mention(need: str, fn: Mapping[str, Any]) -> int:
    """Where the need first mentions the function (word position), so steps run in the order asked."""
    vocabulary = words(str(fn.get("name") or "")) | words(str(fn.get("description") or ""))
    stems = [_stem(w) for w in _WORD.findall(_CAMEL.sub(" ", need).replace("_", " "))]
    return next((i for i, w in enumerate(stems) if w in vocabulary and w.lower() not in _STOP), len(stems))


def functions(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The offered function definitions, in order (non-function tools are skipped)."""
    out = []
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name"):
            out.append(fn)
    return out


def without_client_reminders(text: str) -> str:
    """``text`` without the ``<system-reminder>`` blocks agent clients (Claude Code) put in user turns."""
    return _CLIENT_REMINDER.sub("", text).strip() if "<system-reminder>" in text else text


def latest_need(messages: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """The newest user message's text and its index, or ("", -1).

    The gateway's trailing blocks (``<reminder>``, ``<recalled>`` passages) and the client's own
    ``<system-reminder>`` blocks are context a model reads with the request, not the request: a
    message that holds nothing else is skipped, and the reminders are cut from the one that does."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, Mapping) and m.get("role") == "user":
            text = without_client_reminders(content_text(m.get("content"))[0])
            if text and not text.startswith(("<reminder>", "<recalled")):
                return text, i
    return "", -1


def refers_to_unseen(need: str, messages: Sequence[Mapping[str, Any]], at: int) -> bool:
    """Whether ``need`` is a question about something the request does not hold: at least half of
    its (two or more) content words occur in no other message."""
    stems = words(need)
    if "?" not in need or len(stems) < 2:
        return False
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if i != at:
            seen |= words(content_text(m.get("content"))[0])
    return 2 * len(stems - seen) >= len(stems)


def called_since(messages: Sequence[Mapping[str, Any]], start: int) -> list[str]:
    """Names of the tools the assistant called after message ``start``, in order."""
    names: list[str] = []
    for m in messages[start + 1 :]:
        if isinstance(m, Mapping) and m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                names.append(str(((call or {}).get("function") or {}).get("name") or ""))
    return names


def _rounds_since(messages: Sequence[Mapping[str, Any]], start: int) -> int:
    return sum(1 for m in messages[start + 1 :] if m.get("role") == "assistant" and m.get("tool_calls"))


def arguments_for(
    fn: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], hint: str, facts: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Arguments valid for the function's schema: required fields, plus any the conversation names
    (``facts``, the conversation's facts when the caller has them already)."""
    params = mapping(fn.get("parameters"))
    strict = bool(fn.get("strict"))
    if facts is None:
        facts = conversation_facts(messages)
    value = safe_value_for({"type": "object", **params}, facts=facts, hint=hint, all_properties=strict)
    return value if isinstance(value, dict) else {}


def _allowed(fns: list[Mapping[str, Any]], choice: Any) -> tuple[list[Mapping[str, Any]], Any]:
    """Apply an ``allowed_tools`` choice (the gateway's restriction mode): only the listed tools, its mode."""
    if not (isinstance(choice, Mapping) and choice.get("type") == "allowed_tools"):
        return fns, choice
    spec = mapping(choice.get("allowed_tools"))
    names = set()
    for ref in spec.get("tools") or []:
        if isinstance(ref, Mapping):
            names.add(mapping(ref.get("function")).get("name") or ref.get("name"))
    return [f for f in fns if f.get("name") in names], "required" if spec.get("mode") == "required" else "auto"


def choose_tools(body: Mapping[str, Any]) -> list[ToolPick]:
    """The calls this request gets, or [] when the model should answer in text."""
    fns, choice = _allowed(functions(body), body.get("tool_choice"))
    if not fns or choice == "none":
        return []
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    need, at = latest_need(messages)
    if isinstance(choice, Mapping):
        named = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), Mapping) else None
        named = named or choice.get("name")
        fn = next((f for f in fns if f.get("name") == named), None)
        return [ToolPick(str(fn["name"]), arguments_for(fn, messages, need))] if fn else []
    since = called_since(messages, at)
    planned = plan_file_task(need, fns, messages, since)
    if planned is not None:
        return [ToolPick(name, arguments) for name, arguments in planned]
    if _rounds_since(messages, at) >= MAX_TOOL_ROUNDS:
        return []
    stems = words(need)
    called = set(since)
    recall = next((f for f in fns if f.get("name") == RECALL_TOOL), None)
    if recall is not None and RECALL_TOOL not in called and refers_to_unseen(need, messages, at):
        return [ToolPick(RECALL_TOOL, {"query": need.strip()[:500]})]
    search = next((f for f in fns if f.get("name") == SEARCH_TOOL), None)
    plain = [f for f in fns if f is not search and f is not recall]
    ranked = sorted(
        ((score(stems, fn), -i, fn) for i, fn in enumerate(plain)), key=lambda t: (t[0], t[1]), reverse=True
    )
    fresh = [(s, fn) for s, _, fn in ranked if s >= CLEAR and fn.get("name") not in called]
    fresh.sort(key=lambda pair: first_mention(need, pair[1]))
    if not fresh and search is not None and SEARCH_TOOL not in called and (len(stems) >= 2 or choice == "required"):
        # Nothing offered fits, but the gateway serves a search: ask it for the tool, once per need.
        return [ToolPick(SEARCH_TOOL, {"query": need.strip()[:500]})]
    if choice == "required" and not fresh:
        fresh = [(ranked[0][0], ranked[0][2])] if ranked else [(0, search or fns[0])]
    if not fresh:
        return []
    width = 1 if body.get("parallel_tool_calls") is False else 2
    facts = conversation_facts(messages)  # once for the calls of this turn
    return [ToolPick(str(fn["name"]), arguments_for(fn, messages, need, facts)) for _, fn in fresh[:width]]
