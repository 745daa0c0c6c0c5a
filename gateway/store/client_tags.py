"""The labels a client puts on its own requests: OpenAI's ``user`` and ``metadata``, Anthropic's ``metadata.user_id``.

Teams find their traffic by these (a user id, ``team=search``, ``run=nightly-42``), so the store keeps
them in two columns beside the request, written once from the client's body: ``client_user`` and
``tags``, the metadata as ``;key=value;key=value;`` (sorted, bounded), which one tag matches exactly
as ``LIKE '%;key=value;%'`` on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_USER = 256
MAX_TAGS = 1024
_CUT = str.maketrans({";": ",", "\n": " ", "\r": " "})  # the separator never appears inside a tag


def client_user(body: Mapping[str, Any]) -> str | None:
    """The end user the client named: ``user`` (Chat, Responses), else ``metadata.user_id`` (Messages)."""
    user = body.get("user")
    if not isinstance(user, str) or not user:
        metadata = body.get("metadata")
        user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    return user[:MAX_USER] if isinstance(user, str) and user else None


def client_tags(body: Mapping[str, Any]) -> str | None:
    """The body's ``metadata`` as ``;key=value;...;``, None when it has none; tags past the bound are left out."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping) or not metadata:
        return None
    out = ";"
    for key in sorted(map(str, metadata)):
        value = metadata.get(key)
        text = value if isinstance(value, str) else repr(value)
        tag = f"{key}={text}".translate(_CUT) + ";"
        if len(out) + len(tag) > MAX_TAGS:
            break
        out += tag
    return out if out != ";" else None


def tag_list(tags: str | None) -> list[str]:
    """``;a=1;b=2;`` -> ``["a=1", "b=2"]``."""
    return [t for t in (tags or "").split(";") if t]


def tag_pattern(tag: str) -> str:
    """The LIKE pattern of one ``key=value`` tag (``%`` and ``_`` in it matched literally, escape ``\\``)."""
    escaped = tag.translate(_CUT).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%;{escaped};%"
