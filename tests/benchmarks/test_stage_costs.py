"""benchmarks.stage_costs times every stage of a real request and every enabled pass."""

from __future__ import annotations

from benchmarks.profiles import build_profiles
from benchmarks.stage_costs import Stages, one_request
from gateway.assembly.context import SessionState
from gateway.assembly.pipeline import FORWARD_PASSES
from gateway.config import load_settings


def test_every_stage_and_enabled_pass_is_timed_and_the_session_carries_over() -> None:
    default = load_settings().policy
    # mode: prune, so the tool set is chosen whatever the payoff (auto sends this small list whole)
    policy = default.model_copy(update={"tools": default.tools.model_copy(update={"mode": "prune"})})
    profile = build_profiles(("agent14k",))[0]
    stages, state = Stages(), SessionState(session_id="stage-costs")
    for i in range(3):
        state = one_request(stages, profile.body, policy, state, i)
    enabled = {f"  pass {p.name}" for p in FORWARD_PASSES if getattr(p.policy(policy), "enabled", True)}
    assert enabled <= set(stages.times)
    assert {"parse", "validate", "track_prefix", "after: lint", "writer thread: rows"} <= set(stages.times)
    assert all(len(v) == 3 and min(v) >= 0 for v in stages.times.values())
    assert state.tool_set  # prune_tools remembered the session's tool set, carried to the next request
