"""``ventana replay send``: send a logged assembled request again, to the same or another model.

This is how a team checks whether a wrong answer came from the context or from the
model: the exact bytes the model saw go out again, the new call is recorded as a normal
request linked to the original (``replay_of``), and both answers are shown side by side.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from gateway.config import ModelConfig, Settings
from gateway.errors import StoreError, UpstreamError
from gateway.serve import announce_simulator, models_without_keys, start_simulator_thread, with_simulator
from gateway.store.commands import reading
from gateway.store.queries import StoredRequest, get_request
from gateway.store.record import Answer, Counts, Forwarded, Outcome, RequestRecord, request_record
from gateway.store.writer import write_records
from gateway.tokens import counter_for, encoding_for_model
from gateway.upstream.router import UpstreamRouter
from gateway.upstream.usage import normalise_usage


@dataclass(frozen=True, slots=True)
class Resent:
    original: StoredRequest
    record: RequestRecord


async def _send(settings: Settings, model: ModelConfig, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    router = UpstreamRouter(settings.upstream)
    started = time.perf_counter()
    try:
        data = await router.complete(model, body, router.provider_key(model))
    finally:
        await router.close()
    return data, (time.perf_counter() - started) * 1000


def resend(settings: Settings, request_id: str, *, model_name: str | None = None) -> Resent:
    """Send the stored assembled request of ``request_id`` again and record the new call."""
    with reading(settings) as engine:
        stored = get_request(engine, request_id)
        if stored is None:
            raise StoreError(f"no request {request_id!r} in the store")
        name = model_name or stored.summary.model
        missing = models_without_keys(settings)
        if any(m.name == name for m in missing):
            base_url = start_simulator_thread()
            announce_simulator([m for m in missing if m.name == name], base_url)
            settings = with_simulator(settings, base_url, missing)
        model = settings.model(name)
        if model is None:
            raise StoreError(f"model {name!r} is not configured; configured: {[m.name for m in settings.models]}")
        body = {k: v for k, v in stored.assembled.items() if k not in ("stream", "stream_options")}
        body["model"] = model.name
        sent = Forwarded(
            request_id="req-" + uuid.uuid4().hex[:20],
            session_id=stored.summary.session_id,
            created_at=time.time(),
            model=model.name,
            provider=model.provider,
            caller="replay",
            original=body,
            assembled=body,
            replay_of=stored.summary.request_id,
            turn=stored.summary.turn,
        )
        counter = counter_for(model.tokenizer or encoding_for_model(model.litellm_model))
        tokens = counter.request(body["messages"], body.get("tools"))
        counts = Counts(tokens_original=tokens, tokens_assembled=tokens)
        try:
            data, elapsed = asyncio.run(_send(settings, model, body))
            answer, outcome = (
                Answer.of_completion(data, normalise_usage(data.get("usage"))[1]),
                Outcome(total_ms=elapsed),
            )
        except UpstreamError as exc:
            answer, outcome = Answer(), Outcome(status=exc.status_code, error=exc.message)
        record = request_record(sent, counts, answer, outcome)
        with engine.begin() as conn:
            write_records(conn, [record])
    return Resent(stored, record)


def print_side_by_side(resent: Resent, console: Console) -> None:
    original, new = resent.original, resent.record
    table = Table(title=f"replay of {original.summary.request_id} -> {new.request_id}", show_lines=True)
    table.add_column("", style="bold")
    table.add_column(f"original ({original.summary.model})", overflow="fold")
    table.add_column(f"replay ({new.model})", overflow="fold")
    table.add_row("answer", original.response_text or "", new.response_text or "")
    table.add_row("tool calls", _calls(original.tool_calls), _calls(new.tool_calls))
    table.add_row("finish", str(original.finish_reason), str(new.finish_reason))
    table.add_row("status", str(original.summary.status), f"{new.status} {new.error or ''}".strip())
    table.add_row(
        "usage (prompt / cached / completion)",
        f"{original.summary.prompt_tokens} / {original.summary.cached_tokens} / {original.summary.completion_tokens}",
        f"{new.usage.prompt_tokens} / {new.usage.cached_tokens} / {new.usage.completion_tokens}",
    )
    console.print(table)


def _calls(calls: list[dict[str, Any]] | None) -> str:
    return ", ".join(
        f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})" for c in calls or ()
    )
