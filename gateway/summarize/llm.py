"""Summarise with a configured model: a prompt that keeps every literal fact (``prompt``), bounded output.

The summary is asked in the compact request (the range as a transcript), or, when the caller knows the
model shares the session's provider cache, as the continuation of the session's own request
(``continued``), whose input the provider then reads from its cache.

This is the one summariser that does I/O. It is a plain synchronous callable so the
compaction pass can stay a pure function of its inputs; the API layer runs assembly in
a worker thread (or a background task) whenever this summariser may be called, so the
event loop never blocks on it.

OpenAI-compatible upstreams get one pooled ``httpx.Client``; any other provider goes
through ``litellm.completion``. Every failure is raised as an ``UpstreamError``; the
compaction pass then falls back to the extractive summary, so history is never lost.
Each call the provider answered is charged to the request that made it (``billing``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gateway.assembly.context import SentPrefix
from gateway.config import ModelConfig
from gateway.errors import UpstreamError, UpstreamUnavailable
from gateway.summarize.billing import charge
from gateway.summarize.continued import continued_body
from gateway.summarize.prompt import build_summary_messages
from gateway.upstream.router import scrub_key
from gateway.upstream.side_calls import SideCalls
from gateway.upstream.usage import normalise_usage


class LLMSummarizer:
    """A summariser backed by one configured model; thread-safe, one pooled client."""

    #: Whether ``continued`` reaches the session's cache: the caller knows the session's model (``ClaimedSummarizer``).
    shares_cache = False

    def __init__(self, *, model: ModelConfig, api_key: str | None, timeout_s: float) -> None:
        self.model = model
        self.name = f"llm:{model.name}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._calls = SideCalls(model, api_key, timeout_s)

    def __call__(self, messages: tuple[Mapping[str, Any], ...], previous: str | None, max_tokens: int) -> str:
        chat = build_summary_messages(messages, previous, max_tokens)
        return self._text(
            lambda: self._openai(chat, max_tokens) if self.model.speaks_openai else self._litellm(chat, max_tokens)
        )

    def continued(
        self, sent: SentPrefix, messages: tuple[Mapping[str, Any], ...], previous: str | None, max_tokens: int
    ) -> str:
        """The summary asked as the continuation of the session's sent request (``summarize.continued``).

        Only an OpenAI-compatible upstream is sent one (``choice.shares_cache``): its body goes out as built."""
        body = continued_body(sent, max_tokens)
        return self._text(lambda: self._openai(body.pop("messages"), max_tokens, body))

    def _text(self, call: Callable[[], Any]) -> str:
        try:
            text = call()
        except UpstreamError as exc:  # a provider quotes the key it rejected: it must not reach the store or log
            raise scrub_key(exc, self._api_key) from exc.__cause__
        if not isinstance(text, str) or not text.strip():
            raise UpstreamUnavailable(f"summariser model {self.model.name!r} returned no text")
        return text.strip()

    def _openai(self, chat: list[dict[str, Any]], max_tokens: int, fields: Mapping[str, Any] | None = None) -> Any:
        data = self._calls.chat(chat, max_tokens, fields)
        if isinstance(data, dict):  # billed whatever its text turns out to be: the provider answered
            charge(self.model.name, normalise_usage(data.get("usage"))[1])
        try:
            return data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise UpstreamUnavailable("summariser model returned a body that is not a chat completion") from exc

    def _litellm(self, chat: list[dict[str, str]], max_tokens: int) -> Any:
        import litellm

        from gateway.upstream.litellm_upstream import _map_litellm_error

        try:
            response = litellm.completion(
                model=self.model.litellm_model,
                messages=chat,
                max_tokens=max_tokens,
                temperature=0,
                timeout=self._timeout_s,
                api_key=self._api_key,
                api_base=self.model.api_base,
            )
        except UpstreamError:
            raise
        except Exception as exc:  # litellm raises its own hierarchy and provider SDK errors
            raise _map_litellm_error(exc) from exc
        usage = getattr(response, "usage", None)
        charge(self.model.name, normalise_usage(usage.model_dump() if usage is not None else None)[1])
        return response.choices[0].message.content

    def close(self) -> None:
        self._calls.close()

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self.model.name!r}, timeout_s={self._timeout_s})"
