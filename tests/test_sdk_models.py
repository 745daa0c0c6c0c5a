"""``build_all``, which the ``sdk_models`` fixture runs: tests that read the openai SDK's answers from a pool of
threads rely on every model being built before the pool starts (tests/sdk_models.py)."""

from __future__ import annotations

from tests.sdk_models import build_all, loaded_models


def test_every_answer_model_the_sdk_loaded_is_built() -> None:
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.responses import Response, ResponseCompletedEvent, ResponseOutputText

    # checked on its own call, not the session's fixture: a test since may have made new classes
    # (a structured output's ParsedResponseOutputMessage[...], made when it is parsed)
    build_all()
    for model in (ChatCompletion, ChatCompletionChunk, Response, ResponseCompletedEvent, ResponseOutputText):
        assert model.__pydantic_complete__, model.__name__
    assert len(loaded_models()) > 500  # the chat and responses types, their parts and events
    assert [m.__name__ for m in loaded_models() if not m.__pydantic_complete__] == []
