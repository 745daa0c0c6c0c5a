"""Hypothesis strategies for chat requests with the shapes real clients send.

System/developer prompts with per-turn values (times, ids, counters) and critical
marks, multi-part contents, assistant tool calls with their results, trailing tool
results, tool definitions with dated descriptions, and a session that may remember the
previous turn's system prompt.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gateway.assembly.context import Context, Env, SessionState
from gateway.tokens import counter_for

_VALUES = st.sampled_from(
    [
        "Current time: 2026-11-29T10:{:02d}:00Z",
        "Request ID: 3f2a9b1c-1111-2222-3333-4444555566{:02d}",
        "This is turn {}.",
        "Build wp{:02d}x is live.",
        "Today is 29 Nov 2026, slot {}.",
        "trace_id=abcdef12{:04d}",
    ]
)
_WORDS = st.text(st.sampled_from("abcdefgh ijklmnop.,\n"), min_size=0, max_size=60)
_RULES = st.sampled_from(["", "<critical>Never guess.</critical>", '<critical priority="3">Cite sources.</critical>'])


@st.composite
def system_text(draw: st.DrawFn, n: int) -> str:
    parts = [draw(_WORDS)]
    for template in draw(st.lists(_VALUES, max_size=3)):
        parts.append(template.format(n))
    parts.append(draw(_RULES))
    draw(st.randoms()).shuffle(parts)
    return "\n".join(parts)


def _content(text: str, multipart: bool) -> Any:
    if not multipart:
        return text
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]


@st.composite
def turns(draw: st.DrawFn, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(count):
        out.append({"role": "user", "content": _content(f"question {i} " + draw(_WORDS), draw(st.booleans()))})
        if draw(st.booleans()):
            calls = [
                {"id": f"call_{i}_{k}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                for k in range(draw(st.integers(1, 2)))
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out += [{"role": "tool", "tool_call_id": c["id"], "content": draw(_WORDS)} for c in calls]
        if i < count - 1:
            out.append({"role": "assistant", "content": f"answer {i}"})
    return out


@st.composite
def contexts(draw: st.DrawFn) -> Context:
    n = draw(st.integers(0, 59))
    systems = [
        {
            "role": draw(st.sampled_from(["system", "developer"])),
            "content": _content(draw(system_text(n)), draw(st.booleans())),
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    messages = systems + draw(turns(draw(st.integers(1, 4))))
    tools = draw(
        st.sampled_from(
            [
                None,
                [],
                [
                    {
                        "type": "function",
                        "function": {"name": "lookup", "description": f"Index as of 2026-11-{n % 28 + 1:02d}"},
                    }
                ],
            ]
        )
    )
    previous = tuple(draw(system_text(n + 1)) for _ in systems) if draw(st.booleans()) else ()
    env = Env(
        counter=counter_for("o200k_base"),
        context_window=128_000,
        model="gpt-4o-mini",
        provider=draw(st.sampled_from(["openai", "anthropic"])),
    )
    return Context(
        messages=tuple(messages),
        tools=tuple(tools) if tools is not None else None,
        params={"model": "gpt-4o-mini"},
        env=env,
        session=SessionState("s-prop", turn=1 if previous else 0, previous_system=previous),
    )
