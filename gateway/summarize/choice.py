"""Choose who summarises a session's history: a model when one can really be called, else the rules.

Claude Code and Codex compact with the model itself, because a model keeps what a
conversation means where sentence extraction keeps what it literally said. So, in order:

1. ``policy.compaction.summarizer_model`` names a model: that model, always (this is also
   how a keyless local provider such as the simulator is chosen on purpose).
2. ``policy.compaction.summarize_with_session_model`` (default on) and the session's own
   model has a provider key configured (its ``api_key_env`` is set in the environment):
   the session's own model.
3. Otherwise the extractive summariser (returned as ``None``): no key means the call
   could only fail, and a model served without a key is a local stand-in, not a model.

The extractive summariser stays the fallback of every chunk a model fails
(``summarize_range``), so choosing a model never risks losing history.

A summariser shares the session's provider cache (``shares_cache``) when its calls go to the same
model at the same OpenAI-compatible upstream with the same key: OpenAI-style caches are per model and
organisation, so only then does a summary request that resends the session's prefix
(``summarize.continued``) read it from the cache. Another model, another upstream or another key gets
the compact request, whose input is the range alone. Other providers (Anthropic, Gemini through
litellm) keep the compact request too: their caches follow explicit breakpoints and a changed
``tool_choice``, which the continued request would not reproduce.
"""

from __future__ import annotations

from gateway.config import ModelConfig, Settings
from gateway.upstream.router import UpstreamRouter


def summarizer_model(settings: Settings, session_model: ModelConfig | None) -> ModelConfig | None:
    """The model that summarises ``session_model``'s sessions, or None for the extractive summariser."""
    policy = settings.policy.compaction
    if not policy.enabled or "summarize" not in policy.strategies:
        return None
    if policy.summarizer_model is not None:
        return settings.model(policy.summarizer_model)
    if session_model is not None and policy.summarize_with_session_model and UpstreamRouter.provider_key(session_model):
        return session_model
    return None


def shares_cache(summarizer: ModelConfig, session_model: ModelConfig | None) -> bool:
    """Whether ``summarizer``'s calls read the provider cache that ``session_model``'s requests fill."""
    if session_model is None or not (summarizer.speaks_openai and session_model.speaks_openai):
        return False
    return _cache_owner(summarizer) == _cache_owner(session_model)


def _cache_owner(model: ModelConfig) -> tuple[str | None, ...]:
    """What an OpenAI-style cache is kept per: the upstream, its model and the key that pays."""
    return (model.provider, model.api_base, model.upstream_model, model.api_key_env)
