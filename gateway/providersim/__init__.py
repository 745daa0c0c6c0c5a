"""A local OpenAI-compatible fake provider with OpenAI's prompt-cache accounting.

Used by the README demo when no provider key is set, by the tests (over real HTTP),
and by replay to estimate cache hits offline.
"""

from __future__ import annotations

from gateway.providersim.app import create_sim_app
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.providersim.cache_models import cache_model_for, prompt_blocks

__all__ = ["PrefixCache", "cache_model_for", "create_sim_app", "prompt_blocks", "prompt_token_ids"]
