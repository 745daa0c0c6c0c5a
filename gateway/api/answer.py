"""Forward an assembled request, answer the client, and record the request once it is over.

A request in flight carries what its record is built from (``Forwarded``, and how to make
its ``Counts``); the provider's answer (``Answer``) and how it ended (``Outcome``) join them
in ``finish``, which builds the one ``RequestRecord`` and hands it to the recorder. Nothing
fills a record piece by piece: each step returns its part.

The request never waits for the database, nor for counting: after the answer is built
(non-streamed) or after the last chunk (streamed), both run on the next loop turn. Before the
client has the end of its answer (the body; a stream's ``[DONE]`` or error event) the record as it
stands, without the counts made after the answer, is journaled (``journal``): a gateway killed
between the answer and its writer's commit replays it at its next start (store/journal.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import orjson
from starlette.responses import Response

from gateway import metrics
from gateway.api.deps import Gateway
from gateway.api.event_stream import EventStreamResponse
from gateway.api.owned_stream import OwnedStream
from gateway.api.raw_forward import with_usage_requested
from gateway.api.stream_relay import StreamRelay
from gateway.config import ModelConfig
from gateway.edges.served_tools import ServedTools
from gateway.errors import UpstreamError, VentanaError
from gateway.sched_slice import give_way
from gateway.store.record import Answer, Counts, Forwarded, Outcome, request_record
from gateway.upstream.usage import normalise_usage

_JSON = "application/json"
#: Recorded status of a stream the client abandoned (nginx's "client closed request").
CLIENT_CLOSED = 499
log = logging.getLogger("ventana")

T = TypeVar("T")
#: A chat stream's last event: nothing follows it, so it goes out with the end of the body.
DONE = b"data: [DONE]\n\n"
#: The answer of a request that got none (refused, or the provider failed).
NO_ANSWER = Answer()


@dataclass(frozen=True, slots=True)
class InFlight:
    """One forwarded request: what its record is built from, except the answer and how it ended."""

    gw: Gateway
    model: ModelConfig
    sent: Forwarded
    started: float  # perf_counter at arrival
    headers: dict[str, str]  # sent back with the answer or the error
    count: Callable[[], Counts]  # counts and lint findings, made after the answer
    served: ServedTools | None = None  # the loop answering the gateway's own tools, when it offered one

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


async def complete(flight: InFlight, outgoing: dict[str, Any], api_key: str | None, raw_out: bytes | None) -> Response:
    """Forward a non-streamed request and answer with the provider's JSON (usage normalised)."""
    gw, model = flight.gw, flight.model
    overhead_ms = flight.elapsed_ms()
    _look_ahead(flight)
    if flight.served is None:
        call = gw.upstream.complete(model, outgoing, api_key, raw=raw_out)
    else:  # the model's calls to the gateway's own tools are answered here, never returned
        call = flight.served.complete(lambda b, r: gw.upstream.complete(model, b, api_key, raw=r), outgoing, raw_out)
    data = await _reach_upstream(flight, overhead_ms, call)
    ttfb_ms = flight.elapsed_ms() - overhead_ms
    usage_block, usage = normalise_usage(data.get("usage"), data.get("timings"))
    if usage_block is not None:
        data["usage"] = usage_block
    answer = Answer.of_completion(data, usage)
    response = Response(orjson.dumps(data), media_type=_JSON, headers=flight.headers)
    journal(flight, answer, 200, None, overhead_ms, ttfb_ms)
    # Counting, metrics and recording run on the next loop turn, after this response is
    # written: the client does not wait for them, and a loop callback always runs (a
    # Starlette background task would not if the client had gone).
    asyncio.get_running_loop().call_soon(_count_and_finish, flight, answer, 200, None, overhead_ms, ttfb_ms)
    return response


async def stream(
    flight: InFlight, outgoing: dict[str, Any], body: dict[str, Any], api_key: str | None, raw_out: bytes | None
) -> Response:
    """Forward a streamed request (always asking for usage) and relay its chunks as they come."""
    gw, model = flight.gw, flight.model
    wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    upstream_body = {**outgoing, "stream_options": {**(outgoing.get("stream_options") or {}), "include_usage": True}}
    upstream_raw = with_usage_requested(raw_out, outgoing) if raw_out is not None else None
    overhead_ms = flight.elapsed_ms()
    _look_ahead(flight)
    if flight.served is None:
        opening = gw.upstream.open_stream(model, upstream_body, api_key, raw=upstream_raw)
    else:  # held back until it shows whether it calls one of the gateway's own tools
        opening = flight.served.open_stream(
            lambda b, r: gw.upstream.open_stream(model, b, api_key, raw=r), upstream_body, upstream_raw
        )
    upstream = await _reach_upstream(flight, overhead_ms, opening)
    ttfb_ms = flight.elapsed_ms() - overhead_ms
    relay = StreamRelay(model_name=model.name, forward_usage=wants_usage)
    settle = _once(flight, overhead_ms, ttfb_ms)
    #: How the stream has ended so far: the client having gone until the provider's stream is done.
    ending: list[Any] = [CLIENT_CLOSED, "client disconnected before the stream ended"]

    async def events() -> AsyncGenerator[bytes, None]:
        # No retry in here: once a chunk reached the client, a second attempt would duplicate text.
        try:
            async for payloads in _batches(upstream):
                outs, failure = _fed(relay, payloads)
                if outs:  # events that came together leave together: one write, the client woken once
                    yield outs[0] if len(outs) == 1 else b"".join(outs)
                if failure is not None:  # the events before a bad one were relayed first, as one by one
                    raise failure
            ending[:] = 200, None
            journal(flight, relay.answer(), 200, None, overhead_ms, ttfb_ms)
            yield DONE
        except UpstreamError as exc:
            ending[:] = exc.status_code, exc.message
            metrics.UPSTREAM_ERRORS.labels(model.name, type(exc).__name__).inc()
            journal(flight, relay.answer(), exc.status_code, exc.message, overhead_ms, ttfb_ms)
            yield b"data: " + orjson.dumps(exc.body()) + b"\n\n"
        except Exception as exc:
            ending[:] = 500, f"internal gateway error while streaming: {type(exc).__name__}"
            log.exception("stream relay failed for %s", flight.sent.request_id)
            journal(flight, relay.answer(), 500, ending[1], overhead_ms, ttfb_ms)
            yield b"data: " + orjson.dumps(VentanaError(ending[1]).body()) + b"\n\n"
        finally:
            # Hand the answer over before awaiting anything: if this generator is being cancelled
            # (the client hung up), an await could be interrupted and the rest never run. The
            # counting and recording run on the next loop turn, after the stream's end is written.
            abandon()
            await upstream.aclose()

    def abandon() -> None:
        """Finish the request as it stands; also reached when the generator never started."""
        settle(relay.answer, ending[0], ending[1])

    return EventStreamResponse(
        OwnedStream(events(), abandon=abandon, release=upstream.aclose), headers=flight.headers, last=DONE
    )


def _look_ahead(flight: InFlight) -> None:
    """Let the recorder do what the journal will need on the next loop turn: after this request's task
    has sent it and is waiting for the provider, so that work is off the client's time."""
    asyncio.get_running_loop().call_soon(flight.gw.recorder.look_ahead, flight.sent)


def _fed(relay: StreamRelay, payloads: list[bytes]) -> tuple[list[bytes], Exception | None]:
    """What the relay makes of ``payloads`` for the client, up to the first that fails, and that failure.

    The batch before was sent when this is called: what the record needs of it is gathered now."""
    relay.absorb()
    outs: list[bytes] = []
    for payload in payloads:
        try:
            out = relay.feed(payload)
        except Exception as exc:
            return outs, exc
        if out is not None:
            outs.append(out)
    return outs, None


def _batches(upstream: Any) -> AsyncIterator[list[bytes]]:
    """The upstream stream's payloads in the batches they arrived in, when it tells them (``_SSEStream``:
    its own iterator, no generator between); one by one otherwise (a pass-through key's scrubbing wrapper,
    litellm, the served-tools loop)."""
    batches = getattr(upstream, "batches", None)
    if batches is not None:
        return batches()  # type: ignore[no-any-return]
    return _one_by_one(upstream.chunks())


async def _one_by_one(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    async for payload in chunks:
        yield [payload]


def journal(
    flight: InFlight, answer: Answer, status: int, error: str | None, overhead_ms: float, ttfb_ms: float | None
) -> None:
    """Journal the request's record as it stands before the client has the end of its answer.

    Its counts (tokens before and after assembly, the budget report, lint findings) and the
    served tools' rounds are made after the answer, off the client's time: the journaled record
    goes without them, and is stored only if the process dies before its full record is committed.
    """
    outcome = Outcome(status, error, overhead_ms, ttfb_ms, flight.elapsed_ms())
    flight.gw.recorder.journal(request_record(flight.sent, Counts(), answer, outcome))


def _once(
    flight: InFlight, overhead_ms: float, ttfb_ms: float
) -> Callable[[Callable[[], Answer], int, str | None], None]:
    """Finish ``flight`` with the first outcome given; later ones are ignored (a request is recorded once).

    The answer is taken as its maker (``StreamRelay.answer``), called for the first outcome only: a
    stream's end reaches this three times (its generator's ``finally``, the response's, the stream's
    owner), and each made the answer again, its text joined from every chunk."""
    done = False

    def settle(answer_of: Callable[[], Answer], status: int, error: str | None) -> None:
        nonlocal done
        if done:
            return
        done = True
        answer = answer_of()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a stream finalised by the garbage collector): finish here
            _count_and_finish(flight, answer, status, error, overhead_ms, ttfb_ms)
            return
        loop.call_soon(_count_and_finish, flight, answer, status, error, overhead_ms, ttfb_ms)

    return settle


async def _reach_upstream(flight: InFlight, overhead_ms: float, call: Awaitable[T]) -> T:
    """Await the provider; on failure record the request and raise the error its client gets."""
    try:
        return await call
    except asyncio.CancelledError:  # the server is stopping mid-request: what was forwarded is still recorded
        finish(flight, _counted(flight), status=CLIENT_CLOSED, error="cancelled while waiting for the provider")
        raise
    except UpstreamError as exc:
        text = exc.message
        if exc.attempts:  # what the provider answered each time, for the error page
            text += "\nupstream attempts:\n" + "\n".join(f"{k}. {a}" for k, a in enumerate(exc.attempts, 1))
        finish(flight, _counted(flight), status=exc.status_code, error=text, overhead_ms=overhead_ms, journaled=False)
        metrics.UPSTREAM_ERRORS.labels(flight.model.name, type(exc).__name__).inc()
        exc.headers.update(flight.headers)  # the client can find the failed request's record by its id
        raise
    except Exception as exc:
        counts = _counted(flight)
        log.exception("request %s failed inside the gateway", flight.sent.request_id)
        error = VentanaError(f"internal gateway error: {type(exc).__name__}", headers=flight.headers)
        finish(flight, counts, status=500, error=error.message, overhead_ms=overhead_ms, journaled=False)
        raise error from exc


def _count_and_finish(
    flight: InFlight, answer: Answer, status: int, error: str | None, overhead_ms: float, ttfb_ms: float
) -> None:
    """The bookkeeping after the answer, on the loop turn after its end was written; the client it woke goes
    first (``sched_slice.give_way``), unless other requests are in flight and wait on the loop: the client
    does not wait for it (0.01-0.16 ms of a small request's time on a shared core, RESULTS session 57)."""
    if flight.gw.gives_way and flight.gw.in_flight <= 1:
        give_way()
    counts = _counted(flight)
    finish(flight, counts, answer, status=status, error=error, overhead_ms=overhead_ms, ttfb_ms=ttfb_ms)


def _counted(flight: InFlight) -> Counts:
    """The request's counts; they are bookkeeping, so a failure is logged and the record goes without them."""
    try:
        return flight.count()
    except Exception:  # the record is written without them rather than lost
        log.exception("counting tokens for request %s failed", flight.sent.request_id)
        return Counts()


def finish(
    flight: InFlight,
    counts: Counts,
    answer: Answer = NO_ANSWER,
    *,
    status: int,
    error: str | None = None,
    overhead_ms: float = 0.0,
    ttfb_ms: float | None = None,
    journaled: bool = True,
) -> None:
    """Build the request's record from its parts, then calibrate, count metrics, let the edges learn, record.

    ``journaled=False``: the client has not had its answer (an error about to be raised), and the
    record is journaled here first."""
    gw = flight.gw
    gw.in_flight -= 1
    sent = flight.sent
    if flight.served is not None:  # every upstream call is forwarded and billed: the record counts them all
        sent, resent = flight.served.forwarded(flight.sent, gw.counter(flight.model), answer.usage)
        counts = replace(counts, tokens_assembled=counts.tokens_assembled + resent)
    outcome = Outcome(status, error, overhead_ms, ttfb_ms, flight.elapsed_ms())
    record = request_record(sent, counts, answer, outcome)
    try:  # bookkeeping: a failure here is logged, and the record below is still written
        if status == 200 and answer.usage.prompt_tokens:  # the forwarded calls' usage, no summariser's
            gw.calibration.observe(record.model, record.tokens_assembled, answer.usage.prompt_tokens)
        metrics.observe(record)
    except Exception:
        log.exception("calibration or metrics failed for request %s", record.request_id)
    for step in gw.edges.after_answer:  # e.g. the model's tool calls teach the tools' usage profiles
        try:
            step.answered(record)
        except Exception:
            log.exception("%s failed after the answer of request %s", type(step).__name__, record.request_id)
    try:
        if journaled is False:  # an error answered now (the client gets it once this returns)
            gw.recorder.journal(record)
        gw.recorder.record(record)
    except Exception:
        # The provider has answered (and billed): failing the client now would lose the answer
        # as well as the record. The Recorder contract is not to raise; one that does is a bug
        # made loud here and counted.
        metrics.RECORDS_LOST.inc()
        log.exception("recorder refused request %s; its record is lost", record.request_id)
