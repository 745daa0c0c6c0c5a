"""Fill a JSON schema with a valid value, preferring values the conversation already holds.

A model asked for ``{"city": ...}`` after the user wrote ``city: Lima`` (or a tool returned
``{"city": "Lima"}``) answers ``Lima``; the simulator does the same with ``conversation_facts``
and falls back to a fixed, type-correct value so answers stay deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.tokens import content_text

#: ``key: value`` / ``key = value`` in prose; quoted values may hold spaces.
_PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{1,40})\s*[:=]\s*(\"[^\"\n]{0,200}\"|[^\s,;]{1,200})")
_FORMATS = {
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "time": "00:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_MAX_DEPTH = 8


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (schemas arrive untyped)."""
    return value if isinstance(value, Mapping) else {}


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _walk_json(value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                into.setdefault(_norm(k), v)
            _walk_json(v, into)
    elif isinstance(value, list):
        for item in value[:50]:
            _walk_json(item, into)


def _json_in(text: str) -> Any:
    text = text.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


#: ``(text, tool-call arguments) -> that message's facts``: an agent resends its history every turn,
#: and parsing and walking every tool result again was the largest part of the simulator's CPU on a
#: 14K-token request (the benchmarks' upstream shares the machine's cores with the gateway it measures).
#: The facts are read, never changed, so one message's are shared by every request that holds it.
_MESSAGE_FACTS: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
_MESSAGE_FACTS_LIMIT = 10_000


def _message_facts(text: str, arguments: tuple[str, ...]) -> dict[str, Any]:
    """One message's key -> value pairs, its first mention of a key first (content, then its calls)."""
    found = _MESSAGE_FACTS.get((text, arguments))
    if found is None:
        found = {}
        parsed = _json_in(text)
        if parsed is not None:
            _walk_json(parsed, found)
        else:
            for key, value in _PAIR.findall(text):
                found.setdefault(_norm(key), value.strip('"').rstrip(".?!)"))
        for raw in arguments:
            _walk_json(_json_in(raw), found)
        if len(_MESSAGE_FACTS) >= _MESSAGE_FACTS_LIMIT:
            _MESSAGE_FACTS.clear()
        _MESSAGE_FACTS[(text, arguments)] = found
    return found


def conversation_facts(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Key -> value pairs stated in the conversation, newest first wins (keys normalised)."""
    facts: dict[str, Any] = {}
    for m in reversed(messages):
        if not isinstance(m, Mapping):
            continue
        text = content_text(m.get("content"))[0]
        arguments = tuple(
            str(((call or {}).get("function") or {}).get("arguments") or "") for call in m.get("tool_calls") or []
        )
        for key, value in _message_facts(text, arguments).items():
            facts.setdefault(key, value)
    return facts


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _coerce(value: Any, kind: str) -> Any:
    """The fact as the schema's type, or None when it cannot be one."""
    try:
        if kind == "string":
            return value if isinstance(value, str) else orjson.dumps(value).decode()
        if kind == "integer" and not isinstance(value, bool):
            return int(float(value)) if float(value).is_integer() else None
        if kind == "number" and not isinstance(value, bool):
            number = float(value)  # an integer stays one, as a model copying "18" writes 18
            return int(number) if number.is_integer() and not isinstance(value, float) else number
        if kind == "boolean":
            if isinstance(value, bool):
                return value
            return {"true": True, "false": False}.get(str(value).lower())
        if kind == "array" and isinstance(value, list):
            return value
        if kind == "object" and isinstance(value, Mapping):
            return dict(value)
    except (TypeError, ValueError):
        return None
    return None


def _kind(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return {bool: "boolean", int: "integer", float: "number"}.get(type(enum[0]), "string")
    return "string"


def safe_value_for(schema: Mapping[str, Any], **kwargs: Any) -> Any:
    """``value_for``, or an empty object when the schema is malformed (a fuzzer's bounds that are not numbers)."""
    try:
        return value_for(schema, **kwargs)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError):
        return {}


def value_for(
    schema: Mapping[str, Any],
    *,
    name: str = "",
    facts: Mapping[str, Any] | None = None,
    hint: str = "",
    root: Mapping[str, Any] | None = None,
    all_properties: bool = True,
    depth: int = 0,
) -> Any:
    """A value valid for ``schema``: the conversation's value for ``name`` when it fits, else a fixed one.

    ``hint`` (the text being answered) picks the enum member it mentions. ``all_properties``
    fills optional properties too (structured output, strict mode); tool arguments fill only
    the required ones plus those the conversation names.
    """
    facts = facts or {}
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, Mapping)]
        options = [o for o in options if _resolve(o, root).get("type") != "null"] or options
        if options:
            merged = {**{k: v for k, v in schema.items() if k != key}, **_resolve(options[0], root)}
            return value_for(
                merged, name=name, facts=facts, hint=hint, root=root, all_properties=all_properties, depth=depth
            )
    kind = _kind(schema)
    enum = [e for e in schema.get("enum") or [] if e is not None] if isinstance(schema.get("enum"), list) else []
    fact = facts.get(_norm(name)) if name else None
    if enum:
        if fact is not None and fact in enum:
            return fact
        said = set(re.findall(r"\w+", hint.lower()))
        return next((e for e in enum if isinstance(e, str) and e.lower() in said), enum[0])
    if fact is not None:
        coerced = _coerce(fact, kind)
        if coerced is not None:
            return coerced
    if kind == "object":
        return _object(schema, facts=facts, hint=hint, root=root, all_properties=all_properties, depth=depth)
    if kind == "array":
        if depth >= _MAX_DEPTH:
            return []
        items = mapping(schema.get("items"))
        count = max(1, int(schema.get("minItems") or 0))
        if schema.get("maxItems") is not None:
            count = min(count, int(schema["maxItems"]))
        item = value_for(
            items, name=name, facts=facts, hint=hint, root=root, all_properties=all_properties, depth=depth + 1
        )
        return [item] * count
    if kind == "integer":
        low_bound = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = max(1, int(low_bound) + (1 if "exclusiveMinimum" in schema else 0))
        return min(value, int(schema["maximum"])) if "maximum" in schema else value
    if kind == "number":
        number = max(1.0, float(schema.get("minimum", 1.0)))
        return min(number, float(schema["maximum"])) if "maximum" in schema else number
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = _FORMATS.get(str(schema.get("format") or ""), "example")
    min_len = int(schema.get("minLength") or 0)
    if len(text) < min_len:
        text = text + "x" * (min_len - len(text))
    if schema.get("maxLength") is not None:
        text = text[: int(schema["maxLength"])]
    return text


def _object(
    schema: Mapping[str, Any],
    *,
    facts: Mapping[str, Any],
    hint: str,
    root: Mapping[str, Any],
    all_properties: bool,
    depth: int,
) -> dict[str, Any]:
    if depth >= _MAX_DEPTH:
        return {}
    props = mapping(schema.get("properties"))
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    out: dict[str, Any] = {}
    for key, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        if all_properties or key in required or _norm(key) in facts:
            out[key] = value_for(
                sub, name=key, facts=facts, hint=hint, root=root, all_properties=all_properties, depth=depth + 1
            )
    for key in required:  # required but not described: any string will do
        out.setdefault(key, "example")
    return out
