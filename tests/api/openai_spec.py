"""The official OpenAI OpenAPI description, prepared for fuzzing ``POST /chat/completions``.

Two fixes before use (see ``../shared/specs/README.md``): the file claims OpenAPI 3.1 but
111 schemas still say ``nullable: true``, which 3.1 tooling ignores, so each becomes a
``null`` in ``type`` (and in ``enum`` when there is one); and only the one operation the
gateway serves is kept, with the shared ``components`` its ``$ref``s point into.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

from tests.shared_data import shared_path

SPEC_PATH = shared_path("specs", "openai-openapi.yaml")
CHAT_PATH = "/chat/completions"


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
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    spec = yaml.load(SPEC_PATH.read_text(encoding="utf-8"), Loader=loader)  # CSafeLoader or SafeLoader
    operation = spec["paths"][CHAT_PATH]["post"]
    reduced = {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": [{"url": "/v1"}],
        "paths": {CHAT_PATH: {"post": operation}},
        "components": spec["components"],
    }
    return allow_null(reduced)  # type: ignore[no-any-return]
