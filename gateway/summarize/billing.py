"""What a summariser model billed, charged to the request whose assembly made the call.

Every figure comes from what was forwarded and billed over every upstream call a request
made (DESIGN principle 7), and a model summariser's call is one of them. The ``Summarizer``
protocol returns text so that the passes stay pure and every summariser is one callable;
the provider's usage travels beside it instead: a request opens a ``SummaryBill`` around
its assembly, ``LLMSummarizer`` charges each call's usage to the bill open in its context
(``asyncio.to_thread`` runs the assembly with a copy of that context, which holds the same
bill), and the route records the bill as one ``summarizer``/``billed`` decision. The
record's billed usage, its upstream calls, the metrics and the pages read that decision
(``decision_tally.billed_usage``), so they all state the same sum.

A summary prepared in the background runs under a bill of its own, which the compaction runtime
owes to the session's next request (``api/compaction_runtime.py``); a call made outside any bill
is charged to nobody.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from gateway.assembly.context import Decision
from gateway.decision_tally import SUMMARIZER_PASS as PASS
from gateway.upstream.usage import Usage

#: The action of the decision that bills a request's summariser calls.
ACTION = "billed"


class SummaryBill:
    """The summariser calls made while it is open, with their usage; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[tuple[str, Usage]] = []

    def charge(self, model: str, usage: Usage) -> None:
        with self._lock:
            self._calls.append((model, usage))

    def decisions(self) -> list[Decision]:
        """One ``summarizer``/``billed`` decision per summarising model (none when no call was made)."""
        with self._lock:
            calls = list(self._calls)
        out = []
        for model in dict.fromkeys(m for m, _ in calls):
            used = [u for m, u in calls if m == model]
            total = Usage(
                sum(u.prompt_tokens for u in used),
                sum(u.completion_tokens for u in used),
                sum(u.cached_tokens for u in used),
                sum(u.cache_write_tokens for u in used),
            )
            out.append(
                Decision(
                    PASS,
                    ACTION,
                    reason=f"{len(used)} summariser call(s) to {model}: {total.prompt_tokens:,} prompt and "
                    f"{total.completion_tokens:,} completion tokens billed",
                    detail={
                        "model": model,
                        "calls": len(used),
                        "billed": {
                            "prompt_tokens": total.prompt_tokens,
                            "completion_tokens": total.completion_tokens,
                            "cached_tokens": total.cached_tokens,
                            "cache_write_tokens": total.cache_write_tokens,
                        },
                    },
                )
            )
        return out


_OPEN: ContextVar[SummaryBill | None] = ContextVar("ventana_summary_bill", default=None)


@contextmanager
def summary_bill() -> Iterator[SummaryBill]:
    """Charge the summariser calls made in this context (and threads started from it) to a new bill."""
    bill = SummaryBill()
    token = _OPEN.set(bill)
    try:
        yield bill
    finally:
        _OPEN.reset(token)


def charge(model: str, usage: Usage) -> None:
    """Charge one summariser call's usage to the bill open in this context, if one is."""
    bill = _OPEN.get()
    if bill is not None:
        bill.charge(model, usage)
