"""Load the one YAML file that configures a gateway into typed, validated settings.

Everything a request needs is read once here at start-up; nothing reads a global at
request time. A bad file fails before the server binds, with the key path of the
offending field (``models.0.context_window: Input should be a valid integer``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.assembly.policy import Policy
from gateway.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "ventana.yaml"
DEFAULT_DATABASE_URL = "sqlite:///ventana.db"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_UPSTREAM_TIMEOUT_S = 120.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    """One model clients may name, and where the gateway sends it."""

    name: str
    litellm_model: str
    api_base: str | None = None
    api_key_env: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    tokenizer: str | None = None  # tiktoken encoding; derived from the model name when absent
    cache_model: Literal["openai", "anthropic", "vllm", "none"] | None = None
    #: Answered by Ventana's local provider simulator (``api_base`` is the simulator's): set by
    #: ``ventana serve`` for a model whose key is unset, or by hand to demo a model with no account.
    #: The simulator answers ``anthropic/`` models on its Messages route and every other provider
    #: over chat, so no provider key or provider-specific wire format is needed.
    simulated: bool = False
    #: A local inference server behind an OpenAI-compatible ``api_base``. ``llama.cpp`` makes the
    #: gateway pin each session to one of its ``engine_slots`` (``id_slot``) with ``cache_prompt`` on,
    #: so a session's stable prefix stays in that slot's KV cache; vLLM and Ollama reuse prefixes unasked.
    engine: Literal["llama.cpp", "vllm", "ollama"] | None = None
    engine_slots: int = Field(default=1, gt=0)  # llama.cpp's --parallel
    #: Which OpenAI API the upstream serves a ``/v1/responses`` request with: ``responses`` (its own
    #: ``POST /responses``: the client's body goes natively, docs/responses.md), ``chat`` (only Chat
    #: Completions: the request is translated), or ``auto``: ``responses`` for ``openai/`` models
    #: at OpenAI itself (no ``api_base``, or ``api.openai.com``), ``chat`` for other servers.
    wire_api: Literal["auto", "chat", "responses"] = "auto"

    @property
    def provider(self) -> str:
        return self.litellm_model.split("/", 1)[0] if "/" in self.litellm_model else "openai"

    @property
    def upstream_model(self) -> str:
        """The model id the provider expects (litellm's provider prefix removed)."""
        return self.litellm_model.split("/", 1)[1] if "/" in self.litellm_model else self.litellm_model

    @property
    def speaks_responses(self) -> bool:
        """Whether a Responses request goes to this upstream's own ``POST /responses`` as the client sent it."""
        if self.wire_api != "auto":
            return self.wire_api == "responses" and self.speaks_openai
        base = (self.api_base or "https://api.openai.com").rstrip("/")
        return self.provider == "openai" and base.split("://")[-1].split("/")[0] == "api.openai.com"

    @property
    def speaks_openai(self) -> bool:
        """Whether the body can go to the provider as it is, over our own pooled client."""
        if self.simulated:  # the simulator speaks chat for every provider it has no native route for
            return self.provider != "anthropic"
        return self.provider in {"openai", "hosted_vllm", "openai_compatible"} or (
            self.api_base is not None and self.provider not in {"anthropic", "gemini", "bedrock", "vertex_ai"}
        )


class StoreConfig(_Strict):
    retention_days: int | None = Field(default=None, gt=0)
    redact: tuple[str, ...] = ()
    # Mask well-known secret shapes (store/redact.py SECRET_PATTERNS) as well as ``redact``.
    redact_secrets: bool = True
    queue_size: int = Field(default=10_000, gt=0)
    batch_size: int = Field(default=200, gt=0)
    spool_path: str = "ventana-spool.jsonl"
    #: Where records are hashed and written: a worker thread (default) or a child process, which
    #: takes that CPU off the gateway's GIL (+6-11 % throughput at 32 clients here) for ~100 MB more.
    writer: Literal["process", "thread"] = "thread"
    #: Append each answered request's record to a per-process journal beside the spool before the client
    #: has the end of its answer, so a gateway killed (``kill -9``) with records still queued loses none
    #: (store/journal.py). ``journal_fsync`` also survives a power loss, at an fsync per request.
    journal: bool = True
    journal_fsync: bool = False

    @field_validator("redact")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redact pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns


class AuthConfig(_Strict):
    enabled: bool = False
    keys: tuple[str, ...] = ()  # sha256 hex digests of accepted gateway keys
    admin_keys: tuple[str, ...] = ()
    passthrough: bool = False  # forward the client's own key as the provider key
    protect_metrics: bool = False  # /metrics needs an admin key (open by default for Prometheus scrapes)
    # Browser pages of these origins may call the gateway (CSRF guard; docs/hardening.md), e.g. "https://app.example".
    allowed_origins: tuple[str, ...] = ()
    # Host names admin surfaces answer under with auth off, besides localhost/127.0.0.1/::1 (DNS rebinding guard).
    allowed_hosts: tuple[str, ...] = ()
    #: sha256 hex digest of a gateway key -> the name pages and ``ventana logs`` show for its caller
    #: (instead of the digest's first 12 characters, which is what the store keeps), e.g. {"9f86...": "ci-bot"}.
    key_names: dict[str, str] = {}

    @field_validator("key_names")
    @classmethod
    def _named_digests(cls, names: dict[str, str]) -> dict[str, str]:
        cls._sha256_digests(tuple(names))
        return {d.lower(): n for d, n in names.items()}

    @property
    def caller_names(self) -> dict[str, str]:
        """Caller id (as stored: the key digest's first 12 characters) -> the key's configured name."""
        return {digest[:12]: name for digest, name in self.key_names.items()}

    @field_validator("keys", "admin_keys")
    @classmethod
    def _sha256_digests(cls, digests: tuple[str, ...]) -> tuple[str, ...]:
        bad = [i for i, d in enumerate(digests) if len(d) != 64 or any(c not in "0123456789abcdefABCDEF" for c in d)]
        if bad:
            raise ValueError(
                f"items {bad} are not sha256 hex digests (64 hex characters); "
                "store `ventana keys hash` output, never the key itself"
            )
        return tuple(d.lower() for d in digests)

    @model_validator(mode="after")
    def _someone_can_call(self) -> AuthConfig:
        if self.enabled and not self.keys and not self.admin_keys:
            raise ValueError("auth.enabled is true but auth.keys and auth.admin_keys are both empty: nobody could call")
        return self


class LimitsConfig(_Strict):
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    max_messages: int = Field(default=5_000, gt=0)
    requests_per_minute: int | None = Field(default=None, gt=0)  # per caller (key hash), token bucket
    rate_burst: int | None = Field(default=None, gt=0)  # bucket size; default requests_per_minute
    max_concurrent_per_caller: int | None = Field(default=None, gt=0)  # requests in flight per key; None = no cap


class UpstreamConfig(_Strict):
    timeout_s: float = Field(default=DEFAULT_UPSTREAM_TIMEOUT_S, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    retry_backoff_s: float = Field(default=0.2, ge=0)
    max_connections: int = Field(default=200, gt=0)
    # How long a request waits for one of those connections before a 503 gateway_busy.
    pool_timeout_s: float = Field(default=5.0, gt=0)


class DiagnosticsConfig(_Strict):
    # Probe interval; None = off. At least 1 ms: uvloop (the server's loop) keeps timers in whole ms and
    # rounds a shorter sleep to 0, so a 0.5 ms probe spun the loop at 100 % of a core.
    loop_lag_probe_ms: float | None = Field(default=None, ge=1)
    # Time every event-loop callback (api.loop_lag.CallbackTimer); serves on asyncio's own loop.
    time_callbacks: bool = False
    # FastAPI's native OpenTelemetry (a span and metrics for every request) for a process that configures an
    # OpenTelemetry SDK; off, FastAPI no longer checks on every request whether one is configured.
    opentelemetry: bool = False


class SchedulingConfig(_Strict):
    #: The event loop thread's scheduling slice (Linux 6.12+, gateway/sched_slice.py): short, so the provider's
    #: bytes wake it ahead of a busy neighbour on its core; None leaves the kernel's default.
    loop_slice_us: float | None = Field(default=100.0, ge=100.0, le=100_000.0)


class Settings(_Strict):
    database_url: str = DEFAULT_DATABASE_URL
    models: tuple[ModelConfig, ...] = ()
    policy: Policy = Policy()
    store: StoreConfig = StoreConfig()
    auth: AuthConfig = AuthConfig()
    limits: LimitsConfig = LimitsConfig()
    upstream: UpstreamConfig = UpstreamConfig()
    diagnostics: DiagnosticsConfig = DiagnosticsConfig()
    scheduling: SchedulingConfig = SchedulingConfig()
    session_state: Literal["memory", "database"] = "memory"
    #: Where the key that seals compaction items is kept when VENTANA_SECRET_KEY is unset (gateway/sealing.py).
    secret_key_file: str = "ventana-secret.key"
    redis_url: str | None = None

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: tuple[ModelConfig, ...]) -> tuple[ModelConfig, ...]:
        names = [m.name for m in models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model names must be unique, found {duplicates} more than once")
        return models

    @model_validator(mode="after")
    def _summarizer_model_is_configured(self) -> Settings:
        name = self.policy.compaction.summarizer_model
        if name is not None and self.model(name) is None:
            raise ValueError(
                f"policy.compaction.summarizer_model names {name!r}, which is not a configured model; "
                f"configured models: {[m.name for m in self.models]}"
            )
        return self

    @model_validator(mode="after")
    def _fact_extractor_has_a_model(self) -> Settings:
        memory = self.policy.memory
        if memory.enabled and memory.extract_with == "summarizer" and self.policy.compaction.summarizer_model is None:
            raise ValueError(
                "policy.memory.extract_with is 'summarizer' but policy.compaction.summarizer_model names no model"
            )
        return self

    def model(self, name: str) -> ModelConfig | None:
        for m in self.models:
            if m.name == name:
                return m
        return None


def parse_settings(data: dict[str, Any], *, source: str = "<config>") -> Settings:
    """Validate a config mapping, naming the file and key path of the first bad field."""
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid config {source}: {problems}") from exc


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Read the config named by ``path``, ``$VENTANA_CONFIG`` or the bundled default."""
    chosen = Path(path or os.environ.get("VENTANA_CONFIG") or DEFAULT_CONFIG_PATH)
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {chosen}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {chosen} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config {chosen}: expected a mapping at the top level, found {type(data).__name__}")
    return parse_settings(data, source=str(chosen))
