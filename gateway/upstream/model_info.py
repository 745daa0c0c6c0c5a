"""Model metadata (context window, prices) from the price map bundled in the litellm wheel.

Read as JSON instead of importing litellm (seconds of start-up) for two numbers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

DEFAULT_CONTEXT_WINDOW = 128_000


@dataclass(frozen=True, slots=True)
class ModelInfo:
    context_window: int
    input_cost_per_token: float = 0.0
    output_cost_per_token: float = 0.0
    cache_read_cost_per_token: float = 0.0
    cache_write_cost_per_token: float = 0.0


# Process-wide and pure: litellm's bundled price file, the same for every gateway.
@lru_cache(maxsize=1)
def _price_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def model_info(litellm_model: str, context_window: int | None = None) -> ModelInfo:
    """Look a model up by its litellm name, then without the provider prefix."""
    prices = _price_map()
    entry = prices.get(litellm_model) or prices.get(litellm_model.split("/", 1)[-1]) or {}
    window = context_window or entry.get("max_input_tokens") or entry.get("max_tokens") or DEFAULT_CONTEXT_WINDOW
    input_cost = float(entry.get("input_cost_per_token") or 0.0)
    return ModelInfo(
        context_window=int(window),
        input_cost_per_token=input_cost,
        output_cost_per_token=float(entry.get("output_cost_per_token") or 0.0),
        cache_read_cost_per_token=float(entry.get("cache_read_input_token_cost") or input_cost),
        cache_write_cost_per_token=float(entry.get("cache_creation_input_token_cost") or input_cost),
    )
