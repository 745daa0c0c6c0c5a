"""The gateway's own chat calls to a provider (a summary, a fact list), apart from clients' requests.

They are few, blocking and run in worker threads, so a small synchronous httpx client serves them
rather than the asynchronous pool of the request path (``http1.py``). Errors map to the same ``UpstreamError`` tree
as forwarded requests; the caller scrubs the key from any message it keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.config import ModelConfig
from gateway.upstream.openai_compat import DEFAULT_API_BASE, error_for_exception, error_for_status


class SideCalls:
    """One pooled, thread-safe client for an OpenAI-compatible model's side calls."""

    def __init__(self, model: ModelConfig, api_key: str | None, timeout_s: float) -> None:
        import httpx  # on first use: importing it costs ~0.15 s of start-up

        self.model = model
        self._api_key = api_key
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)))
        self._http_errors = httpx.HTTPError

    def chat(self, messages: list[dict[str, Any]], max_tokens: int, fields: Mapping[str, Any] | None = None) -> Any:
        """POST one chat completion at temperature 0; the parsed body (its shape is the caller's to check).

        ``fields`` are further body fields (a continued summary's messages, tools and cache key)."""
        base = (self.model.api_base or DEFAULT_API_BASE).rstrip("/")
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        body = {
            "model": self.model.upstream_model,
            "messages": messages,
            **(fields or {}),
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        try:
            response = self._client.post(f"{base}/chat/completions", content=orjson.dumps(body), headers=headers)
        except self._http_errors as exc:
            raise error_for_exception(exc) from exc
        if response.status_code >= 400:
            raise error_for_status(response.status_code, response.headers, response.content, response.reason_phrase)
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return None

    def close(self) -> None:
        self._client.close()
