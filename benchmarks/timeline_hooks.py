"""Timestamps at the seams of a served request, for ``benchmarks.request_timeline`` (never imported by the gateway).

Installed in a child process (the gateway, the floor proxy) by a ``sitecustomize`` that
``request_timeline`` puts on its ``PYTHONPATH``: it wraps uvicorn's httptools protocol (the request's
last byte in, each ``send``) and the gateway's upstream client (``http1``: the forward's write, the
provider's first bytes), and in the gateway a few of its own seams (``_mark_gateway_seams``), with
``perf_counter_ns`` marks, kept in memory and written to
``$VENTANA_TIMELINE_DIR/timeline-<pid>.txt`` when the process exits (or is stopped by SIGTERM). A mark
is one list append: the marks cost both proxies alike, and nothing of the gateway's own code changes.
"""

from __future__ import annotations

import atexit
import inspect
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: The environment variable naming the folder the marks are written to; unset, nothing is installed.
DIR_VARIABLE = "VENTANA_TIMELINE_DIR"

_marks: list[tuple[str, int]] = []


def mark(kind: str) -> None:
    _marks.append((kind, time.perf_counter_ns()))


def _dump() -> None:
    folder = os.environ.get(DIR_VARIABLE)
    if not folder:
        return
    with open(os.path.join(folder, f"timeline-{os.getpid()}.txt"), "w") as out:
        out.writelines(f"{kind} {at}\n" for kind, at in _marks)


def install() -> None:
    """Wrap the seams (once per process) and write the marks at exit."""
    from uvicorn.protocols.http import httptools_impl as server

    from gateway.upstream import http1

    if getattr(server, "_timeline", False):
        return
    server._timeline = True  # type: ignore[attr-defined]
    send: Callable[[Any, Any], Awaitable[None]] = server.RequestResponseCycle.send

    async def timed_send(self: Any, message: Any) -> None:
        if message["type"] == "http.response.start":
            kind = "head"
        else:
            kind = "body" if message.get("more_body", False) else "end"
        mark(kind)
        await send(self, message)
        mark(f"{kind} sent")

    protocol = server.HttpToolsProtocol
    protocol.on_message_complete = _marked_at_entry(protocol.on_message_complete, "in")  # type: ignore[method-assign]
    server.RequestResponseCycle.send = timed_send  # type: ignore[method-assign]
    conn = http1._Connection
    # ``begin`` is called right before the request's bytes are written (and on connecting), ``wait`` first right
    # after they were written, ``data_received`` with the provider's bytes
    conn.begin = _marked_at_entry(conn.begin, "forward")  # type: ignore[method-assign]
    conn.wait = _marked_at_entry(conn.wait, "forward sent")  # type: ignore[method-assign]
    conn.data_received = _marked_at_entry(conn.data_received, "provider")  # type: ignore[method-assign]
    if "gateway.cli" in sys.orig_argv:  # the gateway, not the floor proxy (which never imports its app)
        _mark_gateway_seams()
    atexit.register(_dump)
    # uvicorn raises the SIGTERM it stopped on again once it has shut down, to this handler: the default one
    # would end the process without running ``atexit``
    signal.signal(signal.SIGTERM, _dump_and_stop)


def _mark_gateway_seams() -> None:
    """Marks inside the gateway: where its part before the forward and after the provider's answer goes.

    The middleware stack ends at a door (``door``), admission and the body's read at ``answer_chat``
    (``turn``), parsing, naming, the session's load and the edges before at ``assemble_turn``
    (``assemble``), the assembly and its bookkeeping at ``forwarded``; after the answer, the provider's
    answer read (``reached``) and the journal (``journal``, ``journaled``). Each wrapper is one more call
    (~1 us) the gateway pays and the floor does not. The functions are wrapped in their modules, where
    their callers look them up when they call them."""
    from gateway.api import answer, chat, hot_routes

    hot_routes.Door.__call__ = _marked_at_entry(hot_routes.Door.__call__, "door")  # type: ignore[method-assign]
    chat.answer_chat = _marked_at_entry(chat.answer_chat, "turn")
    chat.assemble_turn = _marked_at_entry(chat.assemble_turn, "assemble")
    chat.forwarded = _marked_at_entry(chat.forwarded, "forwarded")
    reach = answer._reach_upstream

    async def reached(*args: Any, **kwargs: Any) -> Any:
        got = await reach(*args, **kwargs)
        mark("reached")
        return got

    answer._reach_upstream = reached
    journal = answer.journal

    def journaled(*args: Any, **kwargs: Any) -> None:
        mark("journal")
        journal(*args, **kwargs)
        mark("journaled")

    answer.journal = journaled


def _marked_at_entry(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``fn`` (a function or a method, a coroutine function or not) marking ``kind`` each time it is entered."""
    if inspect.iscoroutinefunction(fn):

        async def entered(*args: Any, **kwargs: Any) -> Any:
            mark(kind)
            return await fn(*args, **kwargs)

        return entered

    def called(*args: Any, **kwargs: Any) -> Any:
        mark(kind)
        return fn(*args, **kwargs)

    return called


def _dump_and_stop(signum: int, frame: object) -> None:
    _dump()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
