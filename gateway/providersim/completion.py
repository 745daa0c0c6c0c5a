"""The simulated model: a Chat Completions body in, a chat completion out.

Every front door of the simulator (Chat Completions here; Responses and Messages reuse
it) goes through ``complete``: tool calls from ``choose_tools``, structured output from
the request's schema, ``n`` choices, ``logprobs`` and the token cap. A replayed assistant
message (replay mode) replaces the invented one but is shaped, capped and counted the same.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.providersim.choose_tool import ToolPick, choose_tools, latest_need
from gateway.providersim.file_task import file_task
from gateway.providersim.logprobs import entries, token_pieces
from gateway.providersim.schema_values import conversation_facts, mapping, safe_value_for
from gateway.summarize.continued import summarised_range
from gateway.summarize.facts import extract_facts
from gateway.summarize.transcript import transcript_lines
from gateway.tokens import content_text, encoding_for_model

MAX_CHOICES = 16


def _json(value: Any) -> str:
    """``value`` as JSON; ``{}`` when it cannot be (an integer past 64 bits from a schema's ``const``)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return "{}"


def answer_text(messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> str:
    """The invented text answer: a digest of the request and the newest user words, or a summary."""
    last_user, _ = latest_need(messages)
    if is_summary_request(messages):
        return echo_summary(messages, max_tokens)
    digest = hashlib.sha256(orjson.dumps(messages)).hexdigest()[:8]
    answer = f"Simulated answer {digest} to: {last_user[:60]}"
    last = messages[-1] if messages else {}
    if file_task(last_user) is not None and last.get("role") == "tool":  # the task's last step: quote it
        answer += "\nLast result: " + content_text(last.get("content"))[0][:300]
    return answer


def is_summary_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A summariser's call: its transcript block (the compact request), or the conversation continued
    with a ``<summarize messages="a-b">`` instruction (``gateway.summarize.continued``)."""
    if summarised_range(messages) is not None:
        return True
    return any(
        "<transcript" in content_text(m.get("content"))[0]
        for m in messages
        if isinstance(m, Mapping) and m.get("role") == "user"
    )


def _summary_source(messages: Sequence[Mapping[str, Any]]) -> str:
    """The lines to summarise: the transcript block, or the continued request's range rendered alike
    (an earlier ``<summary>`` message in it as ``summary so far:`` lines)."""
    found = summarised_range(messages)
    if found is None:
        text = "\n".join(content_text(m.get("content"))[0] for m in messages if m.get("role") == "user")
        return text.split("<transcript", 1)[-1].split("\n", 1)[-1].split("</transcript>", 1)[0]
    lines: list[str] = []
    span = messages[found[0] : found[1] + 1]
    for m in span:
        text = content_text(m.get("content"))[0]
        if m.get("role") == "user" and text.startswith("<summary"):
            lines += [f"summary so far: {line}" for line in text.splitlines()[1:-1] if line.strip()]
    lines += [
        f"{speaker}: {said}"
        for speaker, said in transcript_lines(
            [m for m in span if not content_text(m.get("content"))[0].startswith("<summary")]
        )
    ]
    return "\n".join(lines)


def echo_summary(messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> str:
    """Answer a summarisation request the way a terse model would: keep the clauses that carry facts.

    Every transcript line is ``speaker: text``; of each line only the clauses with a digit or another
    fact the gateway's fact check counts (a name, an identifier: ``summarize.facts``) survive
    (``speaker: clause; clause``), tool-call lines are kept whole, and an earlier summary folded in as
    ``summary so far:`` lines keeps its text. The answer honours ``max_tokens`` (about 3 characters a
    token): past it, the lines carrying the most facts are kept, in their order.
    """
    body = _summary_source(messages)
    lines: list[str] = []
    for line in body.splitlines():
        line = line.strip().removeprefix("summary so far: ")
        speaker, _, said = line.partition(": ")
        if " called" in speaker or line.startswith("- "):
            lines.append(line)
            continue
        clauses = [c for c in re.split(r"(?<=[.;,])\s+", said) if any(ch.isdigit() for ch in c) or extract_facts(c)]
        if clauses:
            lines.append(f"{speaker}: {' '.join(clauses)}")
    limit = max_tokens * 3 if max_tokens else 20000
    lines = lines[:400]
    if sum(len(line) + 1 for line in lines) > limit:  # too long: the lines with the most facts, in order
        ranked = sorted(range(len(lines)), key=lambda i: -len(extract_facts(lines[i])))
        chosen, used = set(), 0
        for i in ranked:
            if used + len(lines[i]) + 1 <= limit:
                chosen.add(i)
                used += len(lines[i]) + 1
        lines = [line for i, line in enumerate(lines) if i in chosen]
    return "\n".join(lines)


def structured_text(body: Mapping[str, Any], fallback: str) -> str | None:
    """The JSON answer ``response_format`` asks for, generated from its schema; None for plain text."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return None
    messages = body.get("messages") or []
    if fmt.get("type") == "json_schema":
        schema = mapping(mapping(fmt.get("json_schema")).get("schema")) or {"type": "object"}
        need, _ = latest_need(messages)
        return _json(safe_value_for(schema, facts=conversation_facts(messages), hint=need, all_properties=True))
    if fmt.get("type") == "json_object":
        return orjson.dumps({"answer": fallback}).decode()
    return None


def _limit(body: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _choice_count(body: Mapping[str, Any]) -> int:
    n = body.get("n")
    return max(1, min(MAX_CHOICES, n)) if isinstance(n, int) and not isinstance(n, bool) else 1


def _calls(picks: Sequence[ToolPick], completion_id: str, choice: int) -> list[dict[str, Any]]:
    calls = []
    for j, pick in enumerate(picks):
        call_id = "call_" + completion_id[-12:] + ("" if choice == 0 and j == 0 else f"_{choice}_{j}")
        arguments = _json(pick.arguments)
        calls.append({"id": call_id, "type": "function", "function": {"name": pick.name, "arguments": arguments}})
    return calls


def invented_message(body: Mapping[str, Any]) -> dict[str, Any]:
    """The assistant message the simulated model writes for this request (first choice)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    picks = choose_tools(body)
    if picks:
        return {"role": "assistant", "content": None, "tool_picks": picks}
    text = answer_text(messages, _limit(body))
    structured = structured_text(body, text)
    return {"role": "assistant", "content": structured if structured is not None else text}


def complete(
    body: Mapping[str, Any],
    *,
    completion_id: str,
    usage: dict[str, Any],
    message: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The chat completion for ``body``; ``message`` (a replayed assistant turn) overrides the invented one.

    ``usage`` holds the prompt side; its completion side is filled here.
    """
    model = str(body.get("model") or "")
    encoding = encoding_for_model(model)
    source = dict(message) if message is not None else invented_message(body)
    limit = _limit(body)
    summary = message is None and is_summary_request([m for m in body.get("messages") or [] if isinstance(m, Mapping)])
    want_logprobs = bool(body.get("logprobs"))
    top_asked = body.get("top_logprobs")
    top = top_asked if isinstance(top_asked, int) else 0
    choices: list[dict[str, Any]] = []
    completion_tokens = 0
    for i in range(_choice_count(body)):
        picks: list[ToolPick] = source.get("tool_picks") or []
        calls = _calls(picks, completion_id, i) if picks else [dict(c) for c in source.get("tool_calls") or []]
        text = source.get("content")
        if isinstance(text, list):
            text = content_text(text)[0]
        if text is not None and i > 0 and not body.get("response_format") and message is None:
            text = f"{text} (choice {i + 1})"
        finish = "tool_calls" if calls else "stop"
        pieces = token_pieces(text, encoding) if isinstance(text, str) else []
        if limit is not None and not summary and len(pieces) > limit:
            pieces = pieces[:limit]
            text = "".join(pieces)
            finish = "length"
        completion_tokens += len(pieces) + sum(
            len(token_pieces(c["function"]["arguments"], encoding)) + 3 for c in calls
        )
        out: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            out["tool_calls"] = calls
        if message is not None and message.get("reasoning_content"):
            out["reasoning_content"] = message["reasoning_content"]
        logprobs = {"content": entries(pieces, top), "refusal": None} if want_logprobs else None
        choices.append({"index": i, "message": out, "finish_reason": finish, "logprobs": logprobs})
    usage["completion_tokens"] = max(1, completion_tokens)
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": choices,
        "usage": usage,
        "system_fingerprint": "fp_ventana_sim",
    }
