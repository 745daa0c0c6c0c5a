"""What-if accounting of tool pruning: a pass that removed nothing never reports a saving below zero."""

from __future__ import annotations

import json

from gateway.assembly.policy import Policy
from gateway.replay.transcripts import read_transcripts
from gateway.replay.whatif import run_whatif
from tests.shared_data import data_path


def _conversations(tmp_path, name: str, n: int):
    path = data_path(name)
    out = tmp_path / "t.jsonl"
    with path.open() as src, out.open("w") as dst:
        for line, _ in zip(src, range(n), strict=False):
            row = json.loads(line)
            dst.write(json.dumps({"id": row["id"], "messages": row["messages"], "tools": row["tools"]}) + "\n")
    return list(read_transcripts(out, "gpt-4o"))


def test_default_policy_never_reports_a_negative_tool_saving(tmp_path) -> None:
    """The issue's case: a real 13-tool telecom conversation, where pruning does not pay."""
    conversations = _conversations(tmp_path, "agent_loops/tau2_telecom_default.jsonl", 2)
    result = run_whatif(conversations, Policy(), model="gpt-4o", litellm_model="openai/gpt-4o")
    totals = result.totals()
    assert totals.get("saved:prune_tools", 0) >= 0
    assert totals["tool_set_changes"] == 0


def test_a_forced_prune_counts_its_first_set_as_no_change(tmp_path) -> None:
    conversations = _conversations(tmp_path, "agent_loops/tau2_telecom_solo.jsonl", 1)
    policy = Policy.model_validate({"tools": {"mode": "prune", "find_tools": False}})
    result = run_whatif(conversations, policy, model="gpt-4o", litellm_model="openai/gpt-4o")
    first = result.turns[0]
    assert first.saved_by_pass["prune_tools"] > 0  # pruned from the first turn, and saved, not lost
    assert first.tool_set_changes == 0  # the first set of a session is not a change
    assert sum(t.saved_by_pass.get("prune_tools", 0) for t in result.turns) > 0
