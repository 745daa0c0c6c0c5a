"""Finding: JSON nested about 254-1020 deep gave a 500 (``orjson.dumps`` TypeError); it must be a clear 400.

orjson reads up to 1024 levels but writes only 254, so a body it accepted could not be
encoded again for the provider or the store. Deep values anywhere in the body (tool
parameters, content parts, metadata) are refused before forwarding, naming the field.
"""

from __future__ import annotations

import pytest

from tests.api.fuzz_checks import check_answer, post_chat
from tests.procs import SimHandle


def _body(where: str, depth: int) -> bytes:
    """A chat body with one value ``depth`` levels deep, written by hand (encoders recurse)."""
    user = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]'
    if where == "tool parameters":
        schema = '{"type":"object","properties":{"x":' * (depth // 2) + '{"type":"string"}' + "}}" * (depth // 2)
        return f'{user},"tools":[{{"type":"function","function":{{"name":"f","parameters":{schema}}}}}]}}'.encode()
    nested = "[" * depth + '"leaf"' + "]" * depth
    return f'{user},"{where}":{{"k":{nested}}}}}'.encode()


@pytest.mark.parametrize("depth", [300, 700, 1000, 1100])
@pytest.mark.parametrize("where", ["tool parameters", "metadata", "response_format"])
def test_deep_nesting_is_a_400_not_a_500(open_gateway: str, sim: SimHandle, depth: int, where: str) -> None:
    sim.reset()
    status, payload = post_chat(open_gateway + "/v1", None, raw=_body(where, depth))
    error = check_answer(status, payload, what=f"{where} nested {depth} deep")
    assert status == 400 and error is not None and ("deep" in error["message"] or error["code"] == "invalid_json")
    assert sim.received() == []


def test_ordinary_nesting_is_served(open_gateway: str) -> None:
    status, payload = post_chat(open_gateway + "/v1", None, raw=_body("tool parameters", 40))
    assert status == 200, payload[:300]
