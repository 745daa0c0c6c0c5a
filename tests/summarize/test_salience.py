"""salience: template ids are noise only in assistant replies, and only when the opening repeats."""

from __future__ import annotations

from gateway.summarize.salience import fact_weight, salient_facts, template_ids


def test_ids_in_a_repeated_reply_opening_are_noise() -> None:
    lines = [
        ("assistant", f"Simulated answer {h} to: something else {k}")
        for k, h in enumerate(("3fa2b1c9", "0b1c2d3e", "9e8d7c6b"))
    ]
    assert template_ids(lines) == {"3fa2b1c9", "0b1c2d3e", "9e8d7c6b"}


def test_two_repeats_are_not_a_template() -> None:
    assert (
        template_ids(
            [("assistant", "Simulated answer 3fa2b1c9 to: x"), ("assistant", "Simulated answer 0b1c2d3e to: y")]
        )
        == set()
    )


def test_a_user_listing_facts_in_one_phrasing_is_not_noise() -> None:
    lines = [("user", f"Order ORD-{1000 + k} ships on 2026-05-{k + 1:02d}.") for k in range(5)]
    assert template_ids(lines) == set()
    assert "ORD-1003" in salient_facts(lines)


def test_salient_facts_leave_out_template_ids_only() -> None:
    lines = [("user", "The locker code for site 3 is ZX-1234D.")] + [
        ("assistant", f"Simulated answer {h} to: noted") for h in ("3fa2b1c9", "0b1c2d3e", "9e8d7c6b")
    ]
    assert salient_facts(lines) == ["ZX-1234D"]


def test_identifiers_and_dates_weigh_more_than_counts() -> None:
    assert fact_weight("ZX-1234D") > fact_weight("138")
    assert fact_weight("2026-05-01") > fact_weight("Marta")


def test_an_id_the_user_also_gave_is_not_template_noise() -> None:
    lines = [("assistant", f"Ticket TK-{100 + k} opened, anything else?") for k in range(4)]
    assert template_ids(lines) == {"TK-100", "TK-101", "TK-102", "TK-103"}
    assert template_ids([("user", "Ticket TK-101 is the urgent one."), *lines]) == {"TK-100", "TK-102", "TK-103"}
