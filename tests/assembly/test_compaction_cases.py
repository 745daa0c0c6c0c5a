"""Input/expected cases for the two compaction passes: a new case is a new JSON file.

Each file in ``cases/<pass>/`` has a title, the context window, the policy, the client's
messages, and the expected messages and decisions (action plus the detail keys that
identify it). The summaries in them are the extractive summariser's deterministic output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.assembly.clear_tool_results import clear_tool_results
from gateway.assembly.compact_history import compact_history
from tests.assembly.compaction_helpers import make_ctx, policy

CASES = Path(__file__).parent / "cases"
PASSES = {"compact_history": compact_history, "clear_tool_results": clear_tool_results}
DETAIL_KEYS = ("start", "end", "summarizer_calls", "tool", "message_index", "reused")


def _cases() -> list[Any]:
    return [
        pytest.param(name, path, id=f"{name}/{path.stem}")
        for name in PASSES
        for path in sorted((CASES / name).glob("*.json"))
    ]


@pytest.mark.parametrize(("pass_name", "path"), _cases())
def test_case(pass_name: str, path: Path) -> None:
    case = json.loads(path.read_text())
    ctx = make_ctx(case["messages"], window=case["window"])
    out, decisions = PASSES[pass_name](ctx, policy(**case["policy"]).compaction)
    assert list(out.messages) == case["expected"]["messages"], case["title"]
    got = [{"action": d.action, **{k: v for k, v in d.detail.items() if k in DETAIL_KEYS}} for d in decisions]
    assert got == case["expected"]["decisions"], case["title"]
    if not decisions:
        assert out is ctx, "a pass with nothing to do returns its input"
