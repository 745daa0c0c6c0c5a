"""Load what the ``ventana replay`` commands need: policies by name or file, the model, the traffic."""

from __future__ import annotations

from pathlib import Path

import yaml

from gateway.assembly.policy import Policy
from gateway.config import ModelConfig, Settings
from gateway.errors import ConfigError


def load_policy(spec: str, served: Policy | None = None) -> tuple[str, Policy]:
    """``served`` (the config's policy, what the gateway runs), ``default`` (the bundled policy),
    ``off`` (every pass disabled), or a YAML file.

    The file may be a whole gateway config (its ``policy:`` is used) or just the policy mapping.
    """
    if spec == "served":
        return "served", served if served is not None else Policy()
    if spec == "default":
        return "default", Policy()
    if spec == "off":
        return "off", Policy().all_disabled()
    path = Path(spec)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read policy {path}: {exc.strerror}") from exc
    if isinstance(data, dict) and "policy" in data:
        data = data["policy"] or {}
    try:
        return path.stem, Policy.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"invalid policy {path}: {exc}") from exc


def pick_model(settings: Settings, name: str | None) -> ModelConfig:
    if name is None:
        if not settings.models:
            raise ConfigError("the config names no models")
        return settings.models[0]
    found = settings.model(name)
    if found is None:
        raise ConfigError(f"model {name!r} is not configured; configured: {[m.name for m in settings.models]}")
    return found
