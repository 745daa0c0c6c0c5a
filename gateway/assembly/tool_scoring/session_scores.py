"""Score tools against the whole task of a session, not the words of the last message.

An agent calls tools from the state of its task: the reservation id it was given two turns
ago, the step that follows a lookup. So a tool scores against several texts, each scaled to
its best match and weighted: the task (the first user message, or, in agent loops with no
user message, the last section of the system prompt, where frameworks put the ticket), the whole
conversation so far, the current turn (``query_text``) and the system prompt. Then tools
that belong together lift each other (``tool_links``): a tool scores at least
``LINK_WEIGHT`` of the best score among the tools it is linked to, and a tool linked to one
the session already called scores at least ``LINK_WEIGHT`` of the best score overall.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gateway.assembly.message_text import system_indices, user_indices
from gateway.assembly.tool_scoring.documents import query_text, split_identifier, tool_name
from gateway.tokens import content_text

#: (weight, part): the task says most about the tools a session needs; the system prompt of an
#: agent often describes every tool it has, so it only breaks ties.
WEIGHTS: Mapping[str, float] = {"task": 1.0, "conversation": 0.6, "turn": 0.6, "system": 0.25}
#: Weight of the procedures the system prompt gives for this task (``procedure_scores``).
PROCEDURE_WEIGHT = 1.0
#: Sections of the system prompt whose tool mentions count: the best few for the task.
PROCEDURE_SECTIONS = 4
#: Section breaks: a markdown heading, a blank line, or an opening tag at a line start (``<ticket>``).
_HEADING = re.compile(r"\n(?=#{1,6} )|\n\s*\n|\n(?=<[A-Za-z_][\w-]*>)")
LINK_WEIGHT = 0.5
#: Characters of one part: the gist of a task is in its first and last few thousand characters.
MAX_PART_CHARS = 6_000
#: Separators of a namespace prefix (an MCP server's ``github__create_issue``, ``fs.read``, ``k8s/get``).
_NAMESPACE_SEPARATORS = ("__", ".", "/", ":")
#: ToolBench/RapidAPI names end with ``_for_<api>``: tools of one API belong together.
_API_SUFFIX = "_for_"

Scorer = Callable[[str, Sequence[str]], list[float]]


def task_parts(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The texts a tool scores against, by part name (see ``WEIGHTS``); empty parts left out."""
    systems = system_indices(messages)
    system = "\n".join(content_text(messages[i].get("content"))[0] for i in systems)
    users = user_indices(messages)
    task = content_text(messages[users[0]].get("content"))[0] if users else _last_section(system)
    said: list[str] = []
    for m in messages:
        if m.get("role") in ("user", "assistant"):
            said.append(content_text(m.get("content"))[0])
    parts = {
        "task": task[:MAX_PART_CHARS],
        "conversation": "\n".join(p for p in said if p.strip())[-MAX_PART_CHARS:],
        "turn": query_text(messages),
        "system": system[:MAX_PART_CHARS],
    }
    return {k: v for k, v in parts.items() if v.strip()}


def _last_section(system: str) -> str:
    """Where agent frameworks with no user turn put the task: the system prompt's last section."""
    sections = [s for s in _HEADING.split(system) if s.strip()]
    return sections[-1][-MAX_PART_CHARS:] if sections else ""


def session_scores(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    documents: Sequence[str],
    called: frozenset[str],
    scorer: Scorer,
) -> list[float]:
    """One score per tool (same order as ``tools``): weighted task parts, then links."""
    total = [0.0] * len(documents)
    for part, text in task_parts(messages).items():
        scores = scorer(text, documents)
        best = max(scores, default=0.0)
        if best > 0:
            weight = WEIGHTS[part]
            total = [t + weight * s / best for t, s in zip(total, scores, strict=True)]
    procedures = procedure_scores(messages, [tool_name(t) for t in tools], scorer)
    best = max(procedures, default=0.0)
    if best > 0:
        total = [t + PROCEDURE_WEIGHT * p / best for t, p in zip(total, procedures, strict=True)]
    return _linked(total, tools, called)


def procedure_scores(messages: Sequence[Mapping[str, Any]], names: Sequence[str], scorer: Scorer) -> list[float]:
    """Per tool, how relevant to the task the best system-prompt section naming it is (0: none does).

    Sections are split at markdown headings and blank lines; only the ``PROCEDURE_SECTIONS``
    best for the task count, so a manual naming every tool somewhere does not lift them all.
    """
    systems = system_indices(messages)
    if not systems:
        return [0.0] * len(names)
    system = "\n".join(content_text(messages[i].get("content"))[0] for i in systems)
    task = task_parts(messages).get("task", "")
    sections = [s for s in _HEADING.split(system) if s.strip() and s.strip() != task.strip()]
    if not task or len(sections) < 2:
        return [0.0] * len(names)
    relevance = scorer(task, sections)
    top = sorted(range(len(sections)), key=lambda i: -relevance[i])[:PROCEDURE_SECTIONS]
    out = [0.0] * len(names)
    for i in top:
        if relevance[i] <= 0:
            continue
        for j, name in enumerate(names):
            if name in sections[i]:
                out[j] = max(out[j], relevance[i])
    return out


def _linked(scores: list[float], tools: Sequence[Mapping[str, Any]], called: frozenset[str]) -> list[float]:
    links = tool_links(tools)
    names = [tool_name(t) for t in tools]
    top = max(scores, default=0.0)
    out = list(scores)
    for i, peers in enumerate(links):
        lift = max((scores[j] for j in peers), default=0.0)
        if any(names[j] in called for j in peers):
            lift = max(lift, top)
        out[i] = max(out[i], LINK_WEIGHT * lift)
    return out


def tool_links(tools: Sequence[Mapping[str, Any]]) -> list[frozenset[int]]:
    """For each tool, the tools that belong with it: same namespace or API, or an id one takes and
    another names (``get_details_by_id`` and ``get_customer_by_phone`` through ``customer_id``)."""
    names = [tool_name(t) for t in tools]
    groups: dict[str, set[int]] = {}
    for i, name in enumerate(names):
        key = _namespace(name)
        if key:
            groups.setdefault(key, set()).add(i)
    words = [set(split_identifier(n).lower().split()) for n in names]
    links: list[set[int]] = [set() for _ in names]
    for members in groups.values():
        for i in members:
            links[i] |= members - {i}
    for i, tool in enumerate(tools):
        for entity in _id_entities(tool):
            for j, w in enumerate(words):
                if j != i and entity in w:
                    links[i].add(j)
                    links[j].add(i)
    return [frozenset(s) for s in links]


#: A description preamble shared by this many tools or more, of at least ``PREAMBLE_WORDS`` words,
#: marks one app ("This tool belongs to the Vehicle Control System, which allows users to ...").
PREAMBLE_TOOLS = 3
PREAMBLE_WORDS = 6
_SENTENCE_END = re.compile(r"(?<=[.:;])\s")


def app_groups(tools: Sequence[Mapping[str, Any]]) -> list[frozenset[int]]:
    """For each tool, the other tools of its app: one namespace or API (``tool_links``), or one
    description preamble (a first sentence several tools open with, as BFCL's classes do).

    A search that finds one tool of an app brings the others in the same set change: a session
    working in an app goes on to ask for its other tools, one search (one cache break) each.
    """
    names = [tool_name(t) for t in tools]
    keys: list[set[str]] = [set() for _ in tools]
    for i, name in enumerate(names):
        if ns := _namespace(name):
            keys[i].add(ns)
    firsts: dict[str, list[int]] = {}
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        text = str(fn.get("description") or "") if isinstance(fn, Mapping) else ""
        first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
        if len(first.split()) >= PREAMBLE_WORDS:
            firsts.setdefault(first, []).append(i)
    for first, members in firsts.items():
        if len(members) >= PREAMBLE_TOOLS:
            for i in members:
                keys[i].add("pre:" + first)
    by_key: dict[str, set[int]] = {}
    for i, ks in enumerate(keys):
        for k in ks:
            by_key.setdefault(k, set()).add(i)
    return [frozenset(j for k in keys[i] for j in by_key[k] if j != i) for i in range(len(tools))]


def _namespace(name: str) -> str:
    for sep in _NAMESPACE_SEPARATORS:
        if sep in name:
            return "ns:" + name.split(sep, 1)[0]
    if _API_SUFFIX in name:
        return "api:" + name.rsplit(_API_SUFFIX, 1)[1]
    return ""


def _id_entities(tool: Mapping[str, Any]) -> set[str]:
    """Entities whose id the tool takes: ``customer_id`` -> ``customer``, ``orderId`` -> ``order``."""
    fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    params = fn.get("parameters") if isinstance(fn, Mapping) else None
    props = params.get("properties") if isinstance(params, Mapping) else None
    if not isinstance(props, Mapping):
        return set()
    found: set[str] = set()
    for key in props:
        parts = split_identifier(str(key)).lower().split()
        if len(parts) >= 2 and parts[-1] == "id":
            found.add(parts[-2])
    return found


def plausible_misses(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], kept: set[str]) -> int:
    """How many removed tools the session may well ask for: named by the system prompt (an agent's
    manual names the tools its procedures use) or linked to a kept tool (``tool_links``)."""
    system = "\n".join(content_text(messages[i].get("content"))[0] for i in system_indices(messages))
    names = [tool_name(t) for t in tools]
    links = tool_links(tools)
    count = 0
    for i, name in enumerate(names):
        if name in kept:
            continue
        if name in system or any(names[j] in kept for j in links[i]):
            count += 1
    return count
