"""Archiving compacted history and searching it (BM25 fused with MiniLM, the newest turns as the bar), on SQLite
and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine

from gateway.edges.memory import tail_turns
from gateway.memory.archive import archive, archived_count, embed, passages_of, search, turn_numbers
from gateway.tokens import counter_for

COUNT = counter_for("o200k_base").text
CALL = {"id": "c1", "type": "function", "function": {"name": "book_flight", "arguments": '{"to": "LIS"}'}}
HISTORY = [
    {"role": "system", "content": "You book travel."},
    {"role": "user", "content": "I need a flight to Lisbon on the 14th."},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "Booked IB3170, seat 22A."},
    {"role": "user", "content": "My dog Rex comes along, he is a beagle."},
    {"role": "assistant", "content": "Noted, a pet fee applies."},
    {"role": "user", "content": "What else?"},
]


def test_turns_count_user_messages_from_one() -> None:
    assert turn_numbers(HISTORY) == [0, 1, 1, 1, 2, 2, 3]


def test_a_range_becomes_one_passage_per_turn_with_its_positions() -> None:
    rows = passages_of(HISTORY, 1, 6, 300, COUNT)
    assert [(r["start"], r["end"], r["turn_start"], r["turn_end"]) for r in rows] == [(1, 4, 1, 1), (4, 6, 2, 2)]
    assert "book_flight" in rows[0]["text"] and "IB3170" in rows[0]["text"]
    assert "ib3170" in rows[0]["terms"].split()


def test_a_long_turn_is_cut_into_parts() -> None:
    long = [{"role": "user", "content": " ".join(f"Sentence {i} mentions item{i}." for i in range(300))}]
    rows = passages_of(long, 0, 1, 100, COUNT)
    assert len(rows) > 3 and [r["part"] for r in rows] == list(range(len(rows)))
    assert all(COUNT(r["text"]) <= 130 for r in rows)


def test_archive_is_verbatim_idempotent_and_searchable(engine: Engine) -> None:
    rows = passages_of(HISTORY, 1, 6, 300, COUNT)
    archive(engine, "s1", "caller:abc", rows[:1])
    archive(engine, "s1", "caller:abc", rows)  # hierarchical re-compaction re-covers turn 1
    archive(engine, "s2", "caller:other", rows)
    assert archived_count(engine, session_id="s1") == 2
    found = search(engine, "what breed is my dog Rex?", session_id="s1")
    assert [p.turns for p in found] == ["2", "1"]
    assert found[0].score > found[1].score and found[0].text == rows[1]["text"]
    assert {p.session_id for p in search(engine, "flight", owner="caller:other")} == {"s2"}


def test_search_of_an_empty_session_finds_nothing(engine: Engine) -> None:
    assert search(engine, "anything", session_id="nobody") == []


def _templated(turns: int) -> list[dict[str, str]]:
    """An agent's templated turns; one of them also states a fact."""
    out = [{"role": "system", "content": "You run the offsite checklist."}]
    for t in range(turns):
        text = f"Turn {t}: please check the next item on the offsite list and tell me what changed."
        if t == 3:
            text += " The venue deposit for Porto is 4,500 EUR, paid by Ines."
        out += [{"role": "user", "content": text}, {"role": "assistant", "content": f"Checked item {t}: no change."}]
    return out


def test_a_passage_that_only_resembles_the_newest_turns_is_not_recalled(engine: Engine) -> None:
    """Issue 34: the templated question matches every archived turn as well as the visible ones; none is recalled.
    A question about what only the archive holds still finds its turn."""
    history = _templated(12)
    archived_end = 1 + 2 * 8  # turns 0-7 were compacted
    archive(engine, "s-t", "caller:t", passages_of(history, 1, archived_end, 300, COUNT))
    templated = [*history, {"role": "user", "content": "Turn 12: please check the next item on the offsite list."}]
    tail = tail_turns(templated, archived_end)
    assert len(tail) == 3 and all("offsite list" in t for t in tail)
    found = search(engine, str(templated[-1]["content"]), session_id="s-t", tail=tail)
    assert found and all(p.score == 0 for p in found), [(p.turns, p.score) for p in found[:3]]
    asked = [*history, {"role": "user", "content": "How much was the venue deposit in Porto, and who paid it?"}]
    found = search(engine, str(asked[-1]["content"]), session_id="s-t", tail=tail_turns(asked, archived_end))
    assert "4,500 EUR" in found[0].text and found[0].score >= 0.2 and found[1].score < found[0].score


def test_meaning_finds_a_turn_asked_in_other_words(engine: Engine) -> None:
    """BM25 alone has nothing to match here (no shared word); the fused ranking puts the dinner first."""
    history = [
        {"role": "user", "content": "[new session, 2024-02-06]"},
        {"role": "user", "content": "Monica and I tried The Greenhouse last night, the roasted beets were superb."},
        {"role": "assistant", "content": "Sounds like a lovely evening!"},
        {"role": "user", "content": "The quarterly budget review at school ran long again."},
        {"role": "assistant", "content": "Those meetings can drag."},
        {"role": "user", "content": "I replaced the brake pads on the pickup this weekend."},
        {"role": "assistant", "content": "Handy!"},
    ]
    rows = passages_of(history, 0, len(history), 300, COUNT)
    assert {r["dated"] for r in rows} == {"[new session, 2024-02-06]"}, "each turn keeps the date it was said on"
    archive(engine, "s-m", "caller:m", embed(rows))
    found = search(engine, "Which restaurant did we eat at, and what vegetable dish did we like?", session_id="s-m")
    assert "Greenhouse" in found[0].text and found[0].dated == "[new session, 2024-02-06]"
    assert found[0].score > found[1].score


def test_a_turn_on_the_subject_the_newest_turns_discuss_is_still_recalled(engine: Engine) -> None:
    """rhelm held-out ("dental treats"): the answer's turn shared only "Luna", "food" and "clinic" with the
    question, all of them in the newest turns about Luna's food, and was scored 0 as if it repeated them."""
    history = [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": "Luna greeted me at the door, and I tried the dental treats from the clinic "
            "beside her food bowl; she sniffed them twice and ate one.",
        },
        {"role": "assistant", "content": "Good to hear she took one."},
        {"role": "user", "content": "The train ran late again and the office was cold all day."},
        {"role": "assistant", "content": "Sorry about the commute."},
        {"role": "user", "content": "Luna's food from the clinic is the renal mix now, half a bowl at dinner."},
        {"role": "assistant", "content": "Half a bowl is a fine start for Luna's new food."},
        {"role": "user", "content": "I warmed Luna's food a little, the clinic said that helps."},
        {"role": "assistant", "content": "Warming the food often helps."},
        {"role": "user", "content": "Luna slept after her food; I will call the clinic on Friday."},
        {"role": "assistant", "content": "Let me know what the clinic says about Luna."},
    ]
    archived_end = 5
    archive(engine, "s-l", "caller:l", passages_of(history, 1, archived_end, 300, COUNT))
    asked = [*history, {"role": "user", "content": "What did Luna get from the clinic with her food?"}]
    tail = tail_turns(asked, archived_end)
    assert len(tail) == 3
    found = search(engine, str(asked[-1]["content"]), session_id="s-l", tail=tail)
    assert "dental treats" in found[0].text and found[0].score > 0, [(p.turns, p.score) for p in found]


def test_a_templated_turn_is_not_recalled_over_the_one_with_the_questions_own_word(engine: Engine) -> None:
    """Every "locker code at site N" turn matches only words the visible "give me every locker code" has;
    the turn with the question's own "1" matches them too and more, so the others only resemble the tail
    (tests/e2e/test_summaries_e2e.py: turns of sites 2, 4 and 8 were recalled instead of site 1's)."""
    history: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for site, code in ((8, "KA-8349Y"), (1, "HA-2190F"), (4, "PB-1187Q"), (2, "MX-5521T")):
        history += [
            {"role": "user", "content": f"The new locker code at site {site} is {code}; Liam is the only one with it."},
            {"role": "assistant", "content": f"Noted the locker code for site {site}."},
        ]
    archived_end = len(history)
    history += [
        {"role": "user", "content": "I'm at the depot now. Give me the locker code of every site, site by site."},
        {"role": "assistant", "content": "Here is every locker code I have, site by site."},
    ]
    archive(engine, "s-k", "caller:k", passages_of(history, 1, archived_end, 300, COUNT))
    asked = [*history, {"role": "user", "content": "What is the locker code for site 1?"}]
    found = search(engine, str(asked[-1]["content"]), session_id="s-k", tail=tail_turns(asked, archived_end))
    assert "HA-2190F" in found[0].text and found[0].score > 0, [(p.turns, p.score) for p in found]
    assert all(p.score == 0 for p in found if "HA-2190F" not in p.text), [(p.turns, p.score) for p in found]
