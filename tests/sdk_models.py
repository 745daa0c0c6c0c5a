"""The openai SDK's answer models, built up front for tests that read answers from several threads at once.

The SDK defers each model's pydantic schema to its first use, and pydantic's deferred build is not
thread-safe: threads that parse their first ``Response`` or ``ChatCompletion`` together can fail with
"BaseModel cannot be instantiated directly" (7 of 40 fresh processes, 16 threads each, here). Built in one
thread first (the ``sdk_models`` fixture), every model the SDK has loaded is complete before a pool reads."""

from __future__ import annotations

from typing import Any


def loaded_models() -> set[type[Any]]:
    """Every answer model of the openai SDK's ``chat`` and ``responses`` types (stream events included)."""
    import openai.types.chat
    import openai.types.responses  # noqa: F401  (loads the Responses models and their stream events)
    from openai._models import BaseModel as SDKModel

    pending: list[type[Any]] = [SDKModel]
    seen: set[type[Any]] = set()
    while pending:
        for model in pending.pop().__subclasses__():
            if model not in seen:
                seen.add(model)
                pending.append(model)
    return seen


def build_all() -> None:
    for model in loaded_models():
        if not model.__pydantic_complete__:
            model.model_rebuild()
