"""The summariser's share of a request's billed usage, so it is priced at the summariser model's prices.

A request's billed usage includes its summariser calls (``decision_tally.billed_usage``), and
every page priced the whole of it at the request's model: with ``summarizer_model`` naming a
cheaper (or dearer) model, the summaries' tokens were charged at the wrong price. The store
keeps the share beside the usage (``requests.summarizer_*``), the metrics count it under the
summariser's model, and every cost is the request's own tokens at its model's prices plus the
share at the summariser's (``split_cost``), in Python and in SQL alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.decision_tally import SUMMARIZER_PASS


class Prices(Protocol):
    """Per-token prices of one model (``upstream.model_info.ModelInfo`` has them)."""

    @property
    def input_cost_per_token(self) -> float: ...
    @property
    def cache_read_cost_per_token(self) -> float: ...
    @property
    def output_cost_per_token(self) -> float: ...


@dataclass(frozen=True, slots=True)
class SummariserShare:
    """What a request's summariser calls billed, and the model that billed it (None: no call)."""

    model: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def summariser_share(decisions: Iterable[Mapping[str, Any]]) -> SummariserShare:
    """The ``summarizer``/``billed`` decisions of one request, summed. Requests summarise with one model
    (``summarizer_model``, else the session's); if a config change ever billed two, the first names it."""
    model: str | None = None
    prompt = cached = completion = 0
    for d in decisions:
        if d.get("pass") != SUMMARIZER_PASS or d.get("action") != "billed":
            continue
        found = d.get("detail")
        detail: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        bill = detail.get("billed")
        billed: Mapping[str, Any] = bill if isinstance(bill, Mapping) else {}
        model = model or (str(detail.get("model")) if detail.get("model") else None)
        prompt += _int(billed.get("prompt_tokens"))
        cached += _int(billed.get("cached_tokens"))
        completion += _int(billed.get("completion_tokens"))
    return SummariserShare(model, prompt, cached, completion) if (prompt or completion) else SummariserShare()


def _priced(info: Prices, prompt: int, cached: int, completion: int) -> float:
    return (
        max(prompt - cached, 0) * info.input_cost_per_token
        + max(cached, 0) * info.cache_read_cost_per_token
        + max(completion, 0) * info.output_cost_per_token
    )


def _has_price(info: Prices | None) -> bool:
    return info is not None and bool(info.input_cost_per_token or info.output_cost_per_token)


def split_cost(
    model: str,
    prompt_tokens: int,
    cached_tokens: int,
    completion_tokens: int,
    share: SummariserShare,
    price: Callable[[str], Prices | None],
) -> float | None:
    """The provider cost of billed usage that includes ``share``: the rest at ``model``'s prices, the share
    at its summariser model's (at ``model``'s when that one has no known price). None without a price."""
    info = price(model)
    if not _has_price(info):
        return None
    assert info is not None
    own = _priced(
        info,
        prompt_tokens - share.prompt_tokens,
        cached_tokens - share.cached_tokens,
        completion_tokens - share.completion_tokens,
    )
    if share.model is None:
        return own
    other = price(share.model)
    summariser = other if other is not None and _has_price(other) else info
    return own + _priced(summariser, share.prompt_tokens, share.cached_tokens, share.completion_tokens)
