"""Forwarding to providers: one pooled HTTP client for OpenAI-speaking upstreams, litellm for the rest."""

from __future__ import annotations

from gateway.upstream.router import UpstreamRouter
from gateway.upstream.types import UpstreamStream
from gateway.upstream.usage import Usage, normalise_usage

__all__ = ["UpstreamRouter", "UpstreamStream", "Usage", "normalise_usage"]
