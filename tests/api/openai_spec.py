"""The official OpenAI OpenAPI description, prepared for validation and for fuzzing ``POST /chat/completions``.

``tests/data/specs/openai-openapi.json`` holds the part of it the tests use: the operations
and schemas they name and every schema those reach, unchanged (``tests/data/make_subsets.py``
cuts it from the full 2.97 MB file). One fix before use: the file claims OpenAPI 3.1 but its
schemas still say ``nullable: true`` (111 of them in the full file), which 3.1 tooling
ignores, so each becomes a ``null`` in ``type`` (and in ``enum`` when there is one).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from tests.shared_data import TEST_DATA

SPEC_PATH = TEST_DATA / "specs" / "openai-openapi.json"
CHAT_PATH = "/chat/completions"


def load_spec() -> dict[str, Any]:
    """The spec subset as written (a fresh copy: callers may edit it).

    ``json``, not orjson: ``seed``'s bounds are integers wider than 64 bits, which orjson reads as floats.
    """
    spec: dict[str, Any] = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return spec


def allow_null(node: Any) -> Any:
    """Rewrite every ``nullable: true`` schema under ``node`` as a JSON Schema that admits null."""
    if isinstance(node, list):
        return [allow_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: allow_null(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if "type" not in out and "enum" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@lru_cache(maxsize=1)
def chat_spec() -> dict[str, Any]:
    """The spec with only ``POST /chat/completions`` left, nullable rewritten."""
    spec = load_spec()
    operation = spec["paths"][CHAT_PATH]["post"]
    reduced = {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": [{"url": "/v1"}],
        "paths": {CHAT_PATH: {"post": operation}},
        "components": spec["components"],
    }
    return allow_null(reduced)  # type: ignore[no-any-return]
