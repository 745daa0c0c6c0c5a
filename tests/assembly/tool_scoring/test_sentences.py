"""Splitting the turn into the sentences the embedding_sentences scorer embeds one by one."""

from __future__ import annotations

import doctest

from gateway.assembly.tool_scoring import sentences
from gateway.assembly.tool_scoring.sentences import MAX_CHARS, MAX_SENTENCES, split_sentences


def test_docstring_example_runs() -> None:
    assert doctest.testmod(sentences).failed == 0


def test_splits_on_sentence_ends_and_newlines() -> None:
    text = "Will it rain in Oslo? Also, book me a hotel there.\nAnd find a flight home!"
    assert split_sentences(text) == ["Will it rain in Oslo?", "Also, book me a hotel there.", "And find a flight home!"]


def test_drops_one_word_pieces_and_quotes() -> None:
    assert split_sentences('"Thanks. Send the report to Ana."') == ["Send the report to Ana."]


def test_keeps_a_single_sentence_whole() -> None:
    assert split_sentences("What is the weather in Paris on Monday") == ["What is the weather in Paris on Monday"]


def test_caps_the_number_of_sentences() -> None:
    assert len(split_sentences("Do this now. " * 50)) == MAX_SENTENCES


def test_reads_only_the_start_of_a_long_turn() -> None:
    text = "a " * MAX_CHARS + "Late sentence here."
    assert all("Late" not in s for s in split_sentences(text))


def test_decimal_points_do_not_split() -> None:
    assert split_sentences("Convert 3.5 euros to dollars.") == ["Convert 3.5 euros to dollars."]
