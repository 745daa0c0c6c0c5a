"""Case files for the assembly passes: one JSON file per case, one parametrised test per pass.

A case (``tests/assembly/cases/<pass>/<name>.json``) holds::

    title      what the case shows
    request    the chat body (model, messages, tools, other params)
    provider   optional, the Env provider (default "openai")
    state      optional, a SessionState dict (session_id filled in)
    policy     optional, the pass's policy block
    reminder   optional, reminder lines already collected by earlier passes
    annotations optional, annotations set by earlier passes
    expected   any of: messages, tools, reminder (lists), unchanged (messages and tools
               are the input objects), same_context (the very same Context came back),
               decisions (list of {action, reason_contains?, detail: subset}),
               session (subset of the returned state)

A new case is a new file, as in sqlglot's optimizer fixtures and black's test data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from gateway.assembly.context import Context, Decision, Env, SessionState
from gateway.tokens import counter_for

CASES = Path(__file__).resolve().parent / "cases"


def load_cases(pass_name: str) -> list[tuple[str, dict[str, Any]]]:
    folder = CASES / pass_name
    return [(p.stem, orjson.loads(p.read_bytes())) for p in sorted(folder.glob("*.json"))]


def context_of(case: Mapping[str, Any]) -> Context:
    request = case["request"]
    state = SessionState.from_dict({"session_id": "s-case", **case.get("state", {})})
    env = Env(
        counter=counter_for("o200k_base"),
        context_window=int(case.get("context_window", 128_000)),
        model=str(request.get("model", "gpt-4o-mini")),
        provider=str(case.get("provider", "openai")),
    )
    tools = request.get("tools")
    return Context(
        messages=tuple(request["messages"]),
        tools=tuple(tools) if tools is not None else None,
        params={k: v for k, v in request.items() if k not in ("messages", "tools")},
        env=env,
        session=state,
        reminder=tuple(tuple(line) for line in case.get("reminder", ())),  # type: ignore[misc]
        annotations=dict(case.get("annotations", {})),
    )


def _subset(expected: Any, found: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(found, Mapping) and all(k in found and _subset(v, found[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return (
            isinstance(found, list | tuple)
            and len(expected) == len(found)
            and all(_subset(e, f) for e, f in zip(expected, found, strict=True))
        )
    return bool(expected == found)


def check_case(
    run: Callable[[Context, SessionState, Any], tuple[Context, list[Decision]]], policy: Any, case: Mapping[str, Any]
) -> None:
    ctx = context_of(case)
    out, decisions = run(ctx, policy)
    expected = case["expected"]
    if expected.get("same_context"):
        assert out is ctx
    if expected.get("unchanged"):
        assert out.messages is ctx.messages or out.messages == ctx.messages
        assert out.tools == ctx.tools
    if "messages" in expected:
        assert [dict(m) for m in out.messages] == expected["messages"]
    if "tools" in expected:
        assert (list(out.tools) if out.tools is not None else None) == expected["tools"]
    if "reminder" in expected:
        assert [list(line) for line in out.reminder] == expected["reminder"]
    if "session" in expected:
        assert _subset(expected["session"], out.session.to_dict()), out.session.to_dict()
    if "decisions" in expected:
        got = [d.to_dict() for d in decisions]
        assert len(got) == len(expected["decisions"]), got
        for want, have in zip(expected["decisions"], got, strict=True):
            assert have["action"] == want["action"], have
            assert want.get("reason_contains", "") in have["reason"], have
            assert _subset(want.get("detail", {}), have["detail"]), have
    assert [dict(m) for m in ctx.messages] == case["request"]["messages"], "the pass mutated its input"
