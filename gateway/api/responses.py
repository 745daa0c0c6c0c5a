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

import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from gateway.api.chat import answer_chat, caller_hash, read_body
from gateway.api.deps import Gateway
from gateway.api.event_stream import EventStreamResponse
from gateway.errors import NotFound, RequestError
from gateway.formats.responses import chat_body, check_request, input_items, unserved_tools
from gateway.formats.responses_answer import listed_item, response_from_chat, response_object
from gateway.formats.responses_stream import ResponseEvents
from gateway.store.responses import (
    MemoryResponseStore,
    ResponseStore,
    SqlResponseStore,
    StoredResponse,
    conversation,
)

_JSON = "application/json"
#: Items one page of ``input_items`` holds unless ``limit`` says otherwise (the API's default).
DEFAULT_PAGE = 20
MAX_PAGE = 100


def _json(data: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), media_type=_JSON, headers=dict(headers or {}))


def _ventana_headers(answer: Response) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k.startswith("x-ventana-")}


class ResponsesRoute:
    """The four Responses endpoints over one gateway and one response store."""

    def __init__(self, gw: Gateway, store: ResponseStore) -> None:
        self.gw = gw
        self.store = store

    async def create(self, request: Request) -> Response:
        started = time.perf_counter()
        await self.gw.recorder.room()
        raw = await read_body(request, self.gw.settings.limits.max_body_bytes)
        caller, client_key = caller_hash(request)
        try:
            body = check_request(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            raise RequestError(f"the request body is not valid JSON: {exc}", code="invalid_json") from exc
        chain = await self._chain(body, caller)
        response_id = "resp_" + os.urandom(16).hex()
        earlier = conversation(chain)
        own = input_items(body, response_id, earlier)
        chat = chat_body(body, (*earlier, *own))
        named = request.headers.get("x-session-id") or (chain[-1].session_id if chain else None)
        answer = await answer_chat(
            self.gw, orjson.dumps(chat), caller, client_key, named, started=started, route="responses"
        )
        base = response_object(body, response_id, int(time.time()))
        headers = _ventana_headers(answer)
        unserved = unserved_tools(body)
        if unserved:
            headers["x-ventana-unserved-tools"] = ",".join(unserved)

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
            return EventStreamResponse(self._events(answer.events, base, keep), headers=headers)
        response = response_from_chat(orjson.loads(bytes(answer.body)), base, int(time.time()))
        stored = keep(response)
        if stored is not None:
            await self.store.put(stored)
        return _json(response, headers)

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
    ) -> AsyncIterator[bytes]:
        """Relay the chat stream as Responses events, chunk by chunk; store the response before it completes."""
        events = ResponseEvents(base)
        for event in events.start():
            yield _sse(event)
        pending = b""
        try:
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
            stored = keep(response)
            if stored is not None:
                await self.store.put(stored)  # before the client sees completed and can chain on it
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
        if not await self.store.delete(response_id, caller_hash(request)[0]):
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
        stored = await self.store.get(response_id, caller_hash(request)[0])
        if stored is None:
            raise NotFound(f"no response with id {response_id!r}", param="response_id")
        return stored


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
    route = ResponsesRoute(gw, store or MemoryResponseStore())

    def admitted(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            admit(request)
            result: Response = await handler(request)
            return result

        return endpoint

    for prefix in ("/v1", ""):
        app.add_route(f"{prefix}/responses", admitted(route.create), methods=["POST"])
        app.add_route(f"{prefix}/responses/{{response_id}}", admitted(route.get), methods=["GET"])
        app.add_route(f"{prefix}/responses/{{response_id}}", admitted(route.delete), methods=["DELETE"])
        app.add_route(f"{prefix}/responses/{{response_id}}/input_items", admitted(route.input_items), methods=["GET"])
    return route
