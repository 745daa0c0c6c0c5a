"""``/v1/responses``: the Responses API front door over the chat pipeline.

``POST`` translates the request (and the stored conversation ``previous_response_id``
names) into a Chat Completions body and answers it through ``answer_chat``, the seam
every front door shares, so the same passes, records, decisions and metrics apply; the
chat answer (or its chunk stream) is translated back. A chain of responses is one
gateway session: each stored response remembers the session its turn was assembled in
and the next turn names it. ``GET``, ``DELETE`` and ``input_items`` read the caller's
own stored responses; another caller's id is a 404, as if it did not exist.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from gateway import metrics
from gateway.api.admission import admitted
from gateway.api.chat import answer_chat, json_object, read_body
from gateway.api.deps import Gateway
from gateway.api.event_stream import EventStreamResponse
from gateway.api.owned_stream import OwnedStream
from gateway.api.request_ids import REQUEST_ID_HEADER, new_request_id
from gateway.api.responses_compact import (
    Compactor,
    compact_resource,
    compaction_record,
    compacts_natively,
    triggered_events,
    triggered_response,
)
from gateway.api.responses_native import NativeResponses
from gateway.assembly.client_plan import ClientAsk, responses_ask
from gateway.errors import NotFound, RequestError
from gateway.formats.responses import chat_body, check_request, input_items, unserved_tools, untranslated_fields
from gateway.formats.responses_answer import listed_item, response_from_chat, response_object
from gateway.formats.responses_compaction import compaction_settings, compaction_triggered
from gateway.formats.responses_edits import sendable_item, view_of
from gateway.formats.responses_stream import ResponseEvents
from gateway.sealing import Sealer, load_key
from gateway.sessions.identify import client_session
from gateway.store.responses import (
    MemoryResponseStore,
    ResponseStore,
    SqlResponseStore,
    StoredResponse,
    conversation,
)

_JSON = "application/json"
log = logging.getLogger("ventana")
#: Items one page of ``input_items`` holds unless ``limit`` says otherwise (the API's default).
DEFAULT_PAGE = 20
MAX_PAGE = 100


def _json(data: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), media_type=_JSON, headers=dict(headers or {}))


def _ventana_headers(answer: Response) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k.startswith("x-ventana-")}


class ResponsesRoute:
    """The four Responses endpoints over one gateway and one response store."""

    def __init__(self, gw: Gateway, store: ResponseStore, compactor: Compactor) -> None:
        self.gw = gw
        self.store = store
        self.compactor = compactor

    async def create(self, request: Request) -> Response:
        started = time.perf_counter()
        await self.gw.recorder.room()
        raw = await read_body(request, self.gw.settings.limits.max_body_bytes)
        principal = admitted(request)
        caller = principal.caller
        try:
            body = check_request(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            raise RequestError(f"the request body is not valid JSON: {exc}", code="invalid_json") from exc
        threshold = compaction_settings(body)
        triggered = compaction_triggered(body)
        body = self.compactor.expand(body, caller)  # compaction items back into the messages they replaced
        chain = await self._chain(body, caller)
        response_id = "resp_" + os.urandom(16).hex()
        earlier = conversation(chain)
        if triggered and not compacts_natively(self.gw.settings.model(body["model"])):  # OpenAI gets it as sent
            return await self._triggered(body, chain, response_id, caller)
        own = input_items(body, response_id, earlier)
        native = self._native(body, chain, earlier, own, caller)
        forwarded, compaction, client = (*earlier, *own), None, None
        if threshold is not None and native is None:  # a native upstream gets context_management as sent
            forwarded, compaction, client = self._compacted(body, forwarded, threshold, caller)
        chat = chat_body(body, forwarded)
        # Everything the answer is wrapped in is built and checked before forwarding: a field that
        # cannot be echoed or stored is a 400 now, not a 500 after the provider was paid.
        base = _response_base(body, response_id)
        named = request.headers.get("x-session-id") or (chain[-1].session_id if chain else None)
        # Codex names its session in headers and prompt_cache_key: its conversations all open alike
        named = named or client_session(request.headers, body.get("prompt_cache_key"))
        answer = await answer_chat(
            self.gw,
            orjson.dumps(chat),
            principal,
            named,
            started=started,
            native=native,
            route="responses",
            client=client,
        )
        if native is not None and native.used:
            return answer  # the provider's own Response or events, stored by ``native.keep``
        headers = _ventana_headers(answer)
        unserved = unserved_tools(body)
        if unserved:
            headers["x-ventana-unserved-tools"] = ",".join(unserved)
        untranslated = untranslated_fields(body)
        if untranslated:  # what could not cross to the chat upstream (docs/responses.md)
            headers["x-ventana-untranslated"] = ",".join(untranslated)

        def keep(response: dict[str, Any]) -> StoredResponse | None:
            if body.get("store") is False:
                return None
            return StoredResponse(
                response_id=response_id,
                caller=caller,
                previous_id=chain[-1].response_id if chain else None,
                session_id=headers.get("x-ventana-session-id", ""),
                created_at=time.time(),
                items=tuple(own),
                response=response,
            )

        if isinstance(answer, EventStreamResponse):
            events = OwnedStream.around(self._events(answer.events, base, keep, compaction), answer.events)
            return EventStreamResponse(events, headers=headers)
        response = response_from_chat(orjson.loads(bytes(answer.body)), base, int(time.time()))
        if compaction is not None:
            response["output"] = [compaction, *response["output"]]
        if not await self._put(keep(response)):
            headers["x-ventana-stored"] = "false"
        return _json(response, headers)

    def _compacted(
        self, body: Mapping[str, Any], items: tuple[dict[str, Any], ...], threshold: int, caller: str
    ) -> tuple[tuple[dict[str, Any], ...], dict[str, Any] | None, ClientAsk]:
        """``context_management`` compaction: past the client's ``compact_threshold`` (else the policy's share of
        the window), the items to forward instead and the compaction item the output starts with; and the
        client's ask, which the gateway's own compaction plans with."""
        model = self.compactor.model(body.get("model"))
        limit = threshold or int(self.gw.info(model).context_window * self.gw.settings.policy.compaction.threshold)
        before = self.compactor.request_tokens(model, body, items)
        if before <= limit:
            return items, None, responses_ask(threshold, False, before, before)
        _, item, _ = self.compactor.compact(model, items, caller, task_inside=True)
        expanded = tuple(self.compactor.expand({"input": [item]}, caller)["input"])
        after = self.compactor.request_tokens(model, body, expanded)
        return expanded, item, responses_ask(threshold, True, before, after)

    async def _triggered(
        self, body: Mapping[str, Any], chain: list[StoredResponse], response_id: str, caller: str
    ) -> Response:
        """A ``compaction_trigger`` answered by the gateway's compaction (no model call), streamed if asked."""
        earlier = conversation(chain)
        own = input_items({**body, "input": body["input"][:-1]}, response_id, earlier)
        started = time.perf_counter()
        response = triggered_response(self.compactor, _response_base(body, response_id), (*earlier, *own), caller)
        session_id = chain[-1].session_id if chain else ""
        request_id = self._record_compaction(body, response, caller, session_id, started)
        if body.get("store") is not False:
            previous = chain[-1] if chain else None
            await self._put(
                StoredResponse(
                    response_id=response_id,
                    caller=caller,
                    previous_id=previous.response_id if previous else None,
                    session_id=previous.session_id if previous else "",
                    created_at=time.time(),
                    items=tuple(own),
                    response=response,
                )
            )
        headers = {REQUEST_ID_HEADER: request_id}
        if not body.get("stream"):
            return _json(response, headers)

        async def events() -> AsyncGenerator[bytes, None]:
            for event in triggered_events(response):
                yield _sse(event)

        return EventStreamResponse(events(), headers=headers)

    def _record_compaction(
        self, body: Mapping[str, Any], response: Mapping[str, Any], caller: str, session_id: str, started: float
    ) -> str:
        """Record a compaction answered here (no request is missing from the log); its request id."""
        request_id = new_request_id()
        record = compaction_record(request_id, body, response, caller=caller, session_id=session_id, started=started)
        try:
            self.gw.recorder.record(record)
        except Exception:  # bookkeeping: the client has its compaction either way
            log.exception("recording the compaction %s failed", request_id)
        return request_id

    async def compact(self, request: Request) -> Response:
        """``POST /v1/responses/compact``: the conversation (input and/or previous_response_id) compacted."""
        started = time.perf_counter()
        raw = await read_body(request, self.gw.settings.limits.max_body_bytes)
        caller = admitted(request).caller
        body = json_object(raw)
        self.compactor.model(body.get("model"))
        body = dict(self.compactor.expand({**body, "input": body.get("input") or []}, caller))
        chain = await self._chain(body, caller)
        items = (*conversation(chain), *input_items(body, "resp_" + os.urandom(16).hex(), conversation(chain)))
        resource = compact_resource(self.compactor, body, items, caller)
        session_id = chain[-1].session_id if chain else ""
        request_id = self._record_compaction(body, resource, caller, session_id, started)
        return _json(resource, {REQUEST_ID_HEADER: request_id})

    def _native(
        self,
        body: Mapping[str, Any],
        chain: list[StoredResponse],
        earlier: Sequence[Mapping[str, Any]],
        own: Sequence[dict[str, Any]],
        caller: str,
    ) -> NativeResponses | None:
        """The native forwarding of this request when its model's upstream speaks Responses, else None."""
        model = self.gw.settings.model(body["model"])
        if model is None or not model.speaks_responses:
            return None
        given = body["input"]
        client = given if isinstance(given, list) else [{"type": "message", "role": "user", "content": given}]
        # the client's own items as sent; an item_reference as the item it names (the provider never saw it)
        items = [
            sendable_item(own[i]) if isinstance(item, Mapping) and item.get("type") == "item_reference" else item
            for i, item in enumerate(client)
        ]
        view = view_of(body, [*(sendable_item(item) for item in earlier), *items], chained=bool(chain))
        previous_id = chain[-1].response_id if chain else None

        async def keep(response: dict[str, Any], session_id: str) -> None:
            if body.get("store") is False or not isinstance(response.get("id"), str):
                return
            await self.store.put(
                StoredResponse(
                    response_id=response["id"],
                    caller=caller,
                    previous_id=previous_id,
                    session_id=session_id,
                    created_at=time.time(),
                    items=tuple(own),
                    response=response,
                )
            )

        return NativeResponses(view, keep)

    async def _put(self, stored: StoredResponse | None) -> bool:
        """Store a response; False if the store failed. The answer is paid for and goes to the client
        either way (only chaining from it will not find it), so a store error is logged, not raised."""
        if stored is None:
            return True
        try:
            await self.store.put(stored)
        except Exception:
            metrics.RESPONSES_NOT_STORED.inc()
            log.exception("storing response %s failed; the client gets its answer", stored.response_id)
            return False
        return True

    async def _chain(self, body: Mapping[str, Any], caller: str) -> list[StoredResponse]:
        """The stored responses ``previous_response_id`` continues, oldest first (none without one)."""
        previous_id = body.get("previous_response_id")
        if not previous_id:
            return []
        found = await self.store.chain(previous_id, caller)
        if not found:
            raise NotFound(f"previous_response_id {previous_id!r} was not found", param="previous_response_id")
        return found

    async def _events(
        self,
        chunks: AsyncIterator[bytes],
        base: dict[str, Any],
        keep: Callable[[dict[str, Any]], StoredResponse | None],
        compaction: dict[str, Any] | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """Relay the chat stream as Responses events, chunk by chunk; store the response before it completes."""
        events = ResponseEvents(base)
        pending = b""
        try:
            for event in events.start():
                yield _sse(event)
            async for piece in chunks:
                pending += piece
                *whole, pending = pending.split(b"\n\n")
                for block in whole:
                    payload = block.removeprefix(b"data: ").strip()
                    if not payload or payload == b"[DONE]":
                        continue
                    chunk = orjson.loads(payload)
                    if "error" in chunk:  # the chat relay's mid-stream failure, already recorded
                        for event in events.fail(chunk["error"]):
                            yield _sse(event)
                        return
                    for event in events.chunk(chunk):
                        yield _sse(event)
            closing, response = events.complete(int(time.time()))
            if compaction is not None:  # the finished response starts with the compaction item, as non-streamed
                response["output"] = [compaction, *response["output"]]
            await self._put(keep(response))  # before the client sees completed and can chain on it
            for event in closing:
                yield _sse(event)
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    async def get(self, request: Request) -> Response:
        stored = await self._own(request)
        return _json(stored.response)

    async def delete(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not await self.store.delete(response_id, admitted(request).caller):
            raise NotFound(f"no response with id {response_id!r}", param="response_id")
        return _json({"id": response_id, "object": "response", "deleted": True})

    async def input_items(self, request: Request) -> Response:
        stored = await self._own(request)
        items = [listed_item(item) for item in stored.items]
        if request.query_params.get("order", "desc") == "desc":
            items.reverse()
        after = request.query_params.get("after")
        if after:
            ids = [item.get("id") for item in items]
            if after not in ids:
                raise RequestError(f"'after' names {after!r}, which is not an item of this response", param="after")
            items = items[ids.index(after) + 1 :]
        limit = _limit(request.query_params.get("limit"))
        page = items[:limit]
        return _json(
            {
                "object": "list",
                "data": page,
                "has_more": len(items) > limit,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
        )

    async def _own(self, request: Request) -> StoredResponse:
        response_id = request.path_params["response_id"]
        stored = await self.store.get(response_id, admitted(request).caller)
        if stored is None:
            raise NotFound(f"no response with id {response_id!r}", param="response_id")
        return stored


def _response_base(body: Mapping[str, Any], response_id: str) -> dict[str, Any]:
    """The Response object the answer fills in, built from the request; a 400 if it cannot be written."""
    try:
        base = response_object(body, response_id, int(time.time()))
        orjson.dumps(base)
    except (TypeError, ValueError, AttributeError) as exc:
        raise RequestError(f"the request cannot be echoed in a Response: {exc}", code="invalid_value") from exc
    return base


def _limit(given: str | None) -> int:
    if given is None:
        return DEFAULT_PAGE
    if not given.isdigit() or not 1 <= int(given) <= MAX_PAGE:
        raise RequestError(f"'limit' must be an integer from 1 to {MAX_PAGE}; found {given!r}", param="limit")
    return int(given)


def _sse(event: Mapping[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def add_responses_routes(app: Starlette, gw: Gateway, admit: Callable[[Request], object]) -> ResponsesRoute:
    """Serve ``/v1/responses`` on ``app``; ``admit`` checks the caller's key and rate limit, raising if refused."""
    store = SqlResponseStore(gw.settings.database_url) if gw.settings.session_state == "database" else None
    sealer = Sealer(load_key(gw.settings.secret_key_file))
    route = ResponsesRoute(gw, store or MemoryResponseStore(), Compactor(gw, sealer))

    def admitted(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            admit(request)
            result: Response = await handler(request)
            return result

        return endpoint

    for prefix in ("/v1", ""):
        app.add_route(f"{prefix}/responses", admitted(route.create), methods=["POST"])
        app.add_route(f"{prefix}/responses/compact", admitted(route.compact), methods=["POST"])
        app.add_route(f"{prefix}/responses/{{response_id}}", admitted(route.get), methods=["GET"])
        app.add_route(f"{prefix}/responses/{{response_id}}", admitted(route.delete), methods=["DELETE"])
        app.add_route(f"{prefix}/responses/{{response_id}}/input_items", admitted(route.input_items), methods=["GET"])
    return route
