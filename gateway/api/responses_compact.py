"""OpenAI's Responses compaction, for every model: ``POST /v1/responses/compact`` and ``context_management``.

The OpenAI Agents SDK's compaction session and Codex's remote compaction ask the server to compact when the
context fills up; a gateway without it answers them 404 and the session breaks. Here the gateway compacts on
its own terms (``formats/responses_compaction.py`` decides what is kept; the summary is the project's
extractive summariser, deterministic and free of model calls) and seals the result for the caller
(``gateway/sealing.py``), so it works the same in front of OpenAI, Anthropic, a local model or the simulator.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.api.chat import configured_model
from gateway.api.deps import Gateway
from gateway.assembly.clear_tool_results import stub
from gateway.assembly.context import Decision
from gateway.config import ModelConfig
from gateway.errors import RequestError
from gateway.formats.responses import chat_body, chat_messages
from gateway.formats.responses_answer import listed_item
from gateway.formats.responses_compaction import (
    SEALED_KIND,
    Split,
    compaction_item,
    expand_compactions,
    newest_round_kept,
    split_items,
    without_users,
)
from gateway.sealing import Sealer
from gateway.store.record import Forwarded, Outcome, RequestRecord
from gateway.summarize.extractive import ExtractiveSummarizer
from gateway.tokens import TokenCounter

#: Share of the window the newest turns may keep verbatim; the rest of the kept room is the summary's.
KEEP_SHARE = 0.15


class Compactor:
    """Compact a Responses conversation for one caller and open the compaction items it made."""

    def __init__(self, gw: Gateway, sealer: Sealer) -> None:
        self.gw = gw
        self.sealer = sealer

    def model(self, name: Any) -> ModelConfig:
        if not isinstance(name, str) or not name:
            raise RequestError("'model' is required and must be a non-empty string", param="model")
        return configured_model(self.gw, {"model": name})

    def expand(self, request: Mapping[str, Any], caller: str) -> Mapping[str, Any]:
        """The request with every compaction item in ``input`` replaced by what it stands for."""
        given = request.get("input")
        if not isinstance(given, list):
            return request
        expanded = expand_compactions(
            given, lambda token, param: self.sealer.open(SEALED_KIND, caller, token, param=param)
        )
        return request if expanded is None else {**request, "input": expanded}

    def tokens(self, model: ModelConfig, items: Sequence[Mapping[str, Any]]) -> int:
        return self.gw.counter(model).messages(chat_messages(items))

    def request_tokens(self, model: ModelConfig, request: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> int:
        """What the gateway's own compaction compares with its threshold (``compaction_layout.request_tokens``):
        the whole chat request, tools and the answer's reserve included. ``context_management`` measures with
        it too, so the client's compaction is done here first, never the gateway's at the same threshold."""
        chat = chat_body(request, items)
        given = request.get("max_output_tokens")
        reserve = given if isinstance(given, int) else self.gw.settings.policy.compaction.reserve_tokens
        return self.gw.counter(model).request(chat["messages"], chat.get("tools")) + reserve

    def compact(
        self,
        model: ModelConfig,
        items: Sequence[Mapping[str, Any]],
        caller: str,
        *,
        task_inside: bool,
        client_keeps_users: bool = False,
    ) -> tuple[Split, dict[str, Any], int]:
        """Split, summarise and seal ``items``: the split, the compaction item, and the summary's tokens.

        ``task_inside`` seals the task message with the rest (``context_management``: the client may drop
        everything before the item); otherwise the task stays visible before the item (``/compact``).
        ``client_keeps_users``: the client puts its own user messages before the item (``compaction_trigger``:
        Codex does), so the kept turns leave them out rather than say them twice."""
        counter = self.gw.counter(model)
        window = self.gw.info(model).context_window
        policy = self.gw.settings.policy.compaction
        split = split_items(items, int(window * KEEP_SHARE), lambda item: _item_tokens(counter, item))
        split = newest_round_kept(split, lambda call, output: _shortened(counter, call, output))
        summary = ExtractiveSummarizer(counter)(tuple(chat_messages(split.middle)), None, policy.summary_max_tokens)
        kept = [*split.task, *split.tail] if task_inside else list(split.tail)
        if client_keeps_users:
            kept = without_users(split.tail)
        token = self.sealer.seal(
            SEALED_KIND, caller, {"summary": summary, "items": kept, "task": len(split.task) if task_inside else 0}
        )
        return split, compaction_item("cmp_" + os.urandom(12).hex(), token), counter.text(summary)


def _item_tokens(counter: TokenCounter, item: Mapping[str, Any]) -> int:
    try:
        return counter.messages(chat_messages([item]))
    except RequestError:
        return 0


def _shortened(counter: TokenCounter, call: Mapping[str, Any], output: Mapping[str, Any]) -> dict[str, Any]:
    """A tool output too big to keep, as the gateway's clearing stub (what was called, its cost, its facts)."""
    given = output.get("output")
    text = given if isinstance(given, str) else orjson.dumps(given).decode()
    name, arguments = str(call.get("name") or "tool"), str(call.get("arguments") or "")
    return {**output, "output": stub(name, counter.text(text), arguments, text)}


def compact_resource(
    compactor: Compactor, request: Mapping[str, Any], items: Sequence[Mapping[str, Any]], caller: str
) -> dict[str, Any]:
    """The ``response.compaction`` object ``POST /v1/responses/compact`` answers with."""
    model = compactor.model(request.get("model"))
    split, item, summary_tokens = compactor.compact(model, items, caller, task_inside=False)
    return {
        "id": "resp_" + os.urandom(16).hex(),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*(listed_item(task) for task in split.task), item],
        "usage": _usage(compactor.tokens(model, items), summary_tokens),
    }


def compacts_natively(model: ModelConfig | None) -> bool:
    """Whether ``model``'s upstream answers a ``compaction_trigger`` itself: OpenAI's own API (or Azure's)
    over the native Responses door. Another server that speaks Responses (vLLM, the simulator) does not
    know the item, so the gateway answers it there too."""
    if model is None or not model.speaks_responses:
        return False
    host = (model.api_base or "https://api.openai.com").split("://")[-1].split("/")[0]
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


def triggered_response(
    compactor: Compactor, base: Mapping[str, Any], items: Sequence[Mapping[str, Any]], caller: str
) -> dict[str, Any]:
    """The finished Response a ``compaction_trigger`` asks for: its one output item is the compaction item.

    The client (Codex) keeps its own user messages and puts the item after them, so the item seals the
    summary and the newest turns less those messages. No model is called."""
    model = compactor.model(base.get("model"))
    _, item, summary_tokens = compactor.compact(model, items, caller, task_inside=False, client_keeps_users=True)
    at = int(time.time())
    usage = _usage(compactor.tokens(model, items), summary_tokens)
    return {**base, "status": "completed", "completed_at": at, "output": [item], "usage": usage}


def triggered_events(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``triggered_response`` as the event stream OpenAI sends for it (Codex reads ``output_item.done`` and
    ``response.completed``)."""
    item = response["output"][0]
    opening = {**response, "status": "in_progress", "completed_at": None, "output": []}
    opening.pop("usage", None)
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": opening}),
        ("response.in_progress", {"response": opening}),
        ("response.output_item.added", {"output_index": 0, "item": item}),  # Codex parses the whole item here too
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": dict(response)}),
    ]
    return [{"type": kind, "sequence_number": n, **fields} for n, (kind, fields) in enumerate(kinds)]


def _usage(input_tokens: int, summary_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": summary_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + summary_tokens,
    }


def compaction_record(
    request_id: str,
    body: Mapping[str, Any],
    response: Mapping[str, Any],
    *,
    caller: str,
    session_id: str = "",
    started: float,
) -> RequestRecord:
    """The record of a compaction the gateway answered itself (``/responses/compact``, ``compaction_trigger``):
    stored like every request, so ``ventana logs`` and ``/ui`` show it, with nothing forwarded and nothing
    billed (no model was called) and one decision saying what was compacted."""
    usage = response.get("usage") or {}
    before, summary = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    decision = Decision(
        "context_management",
        "compacted_by_gateway",
        before,
        summary,
        "the client asked for compaction; the gateway compacted without a model call",
        {"items": len(body.get("input") or []), "upstream_calls": 0},
    )
    sent = Forwarded(
        request_id,
        session_id,
        time.time(),
        str(body.get("model") or ""),
        "",
        caller,
        dict(body),
        {},
        decisions=(decision.to_dict(),),
        stream=bool(body.get("stream")),
        route="responses",
    )
    elapsed = (time.perf_counter() - started) * 1000
    return RequestRecord(sent, outcome=Outcome(status=200, overhead_ms=elapsed, total_ms=elapsed))
