"""Schemathesis against the official OpenAI description of ``POST /chat/completions``: never a 5xx.

Cases come from ``CreateChatCompletionRequest`` (positive: valid by the spec, with the
model set to one the gateway serves so they reach the pipeline and the provider;
negative: violating the spec). Bounded to keep the module under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.api.fuzz_checks import check_answer, post_chat
from tests.api.openai_spec import chat_spec
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

POSITIVE_EXAMPLES = 40
NEGATIVE_EXAMPLES = 25
FUZZ = settings(
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzz_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {"models": sim_models(sim.base_url), "upstream": {"max_retries": 0, "timeout_s": 10}}
    with run_gateway(tmp_path_factory.mktemp("gw-fuzz"), config) as handle:
        yield handle


def _operation() -> schemathesis.APIOperation:
    schema = schemathesis.openapi.from_dict(chat_spec())
    return schema["/chat/completions"]["POST"]


def test_spec_valid_requests_never_get_a_5xx(fuzz_gateway: GatewayHandle) -> None:
    @settings(FUZZ, max_examples=POSITIVE_EXAMPLES)
    @given(case=_operation().as_strategy(GenerationMode.POSITIVE), model=st.sampled_from(["gpt-4o-mini", "nope"]))
    def run(case: schemathesis.Case, model: str) -> None:
        body = case.body
        if isinstance(body, dict):
            body = {**body, "model": model if model == "nope" else "gpt-4o-mini"}
        status, payload = post_chat(fuzz_gateway.base_url, body)
        statuses.append(status)
        check_answer(status, payload, what=repr(body)[:800])

    statuses: list[int] = []
    run()
    assert fuzz_gateway.proc.poll() is None
    print("statuses", sorted(statuses))
    assert 200 in statuses, "no generated request got through: the fuzzing never reached the provider"


def test_spec_invalid_requests_get_a_4xx_that_names_the_problem(fuzz_gateway: GatewayHandle) -> None:
    @settings(FUZZ, max_examples=NEGATIVE_EXAMPLES)
    @given(case=_operation().as_strategy(GenerationMode.NEGATIVE))
    def run(case: schemathesis.Case) -> None:
        body = case.body
        raw = body if isinstance(body, bytes) else None
        check_answer(*post_chat(fuzz_gateway.base_url, body, raw=raw), what=repr(body)[:800])

    run()
    assert fuzz_gateway.proc.poll() is None
