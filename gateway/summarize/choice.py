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
