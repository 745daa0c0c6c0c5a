"""Admission names one caller per request, the same for every header a door accepts (issue 35).

The end-to-end matrix is ``tests/security/test_principal_matrix.py``; this pins the table itself:
which header is the gateway key, which is the provider key, and what the caller is, with auth on
and off, with and without pass-through.
"""

from __future__ import annotations

import pytest

from gateway.api.admission import ANONYMOUS, Admission, hash_key
from gateway.config import AuthConfig
from gateway.errors import AuthError

KEY_A, KEY_B, PROVIDER = "vk-adm-a-0123", "vk-adm-b-0123", "sk-shared-provider"
A, B = hash_key(KEY_A)[:12], hash_key(KEY_B)[:12]


def _on(passthrough: bool = False) -> Admission:
    return Admission(AuthConfig(enabled=True, keys=(hash_key(KEY_A), hash_key(KEY_B)), passthrough=passthrough))


@pytest.mark.parametrize(
    ("headers", "caller", "header"),
    [
        ({"authorization": f"Bearer {KEY_A}"}, A, "authorization"),
        ({"x-api-key": KEY_A}, A, "x-api-key"),  # was admitted, then scoped as 'anonymous'
        ({"x-ventana-key": KEY_B}, B, "x-ventana-key"),
        ({"authorization": f"Bearer {KEY_B}", "x-api-key": KEY_A}, B, "authorization"),
    ],
)
def test_every_key_header_names_its_own_caller(headers: dict[str, str], caller: str, header: str) -> None:
    principal = _on().principal(headers)
    assert (principal.caller, principal.key_header, principal.passthrough, principal.provider_key) == (
        caller,
        header,
        False,
        None,
    )


@pytest.mark.parametrize("provider_header", ["authorization", "x-api-key"])
def test_passthrough_names_the_caller_from_the_gateway_key_never_the_provider_key(provider_header: str) -> None:
    provider = {provider_header: f"Bearer {PROVIDER}" if provider_header == "authorization" else PROVIDER}
    a = _on(passthrough=True).principal({**provider, "x-ventana-key": KEY_A})
    b = _on(passthrough=True).principal({**provider, "x-ventana-key": KEY_B})
    assert (a.caller, b.caller) == (A, B)
    assert a.passthrough and a.provider_key == PROVIDER
    assert PROVIDER not in repr(a), "the provider key is never printed"
    with pytest.raises(AuthError):
        _on(passthrough=True).principal(provider)  # the provider key alone admits nobody


def test_unknown_or_missing_keys_are_refused_whatever_the_header() -> None:
    for headers in ({}, {"authorization": "Bearer vk-guess"}, {"x-api-key": "vk-guess"}, {"x-ventana-key": "x"}):
        with pytest.raises(AuthError):
            _on().principal(headers)


def test_auth_off_still_tells_keys_apart() -> None:
    off = Admission(AuthConfig())
    assert off.principal({}).caller == ANONYMOUS
    assert off.principal({"x-api-key": KEY_A}).caller == off.principal({"authorization": f"Bearer {KEY_A}"}).caller == A
    passthrough = Admission(AuthConfig(passthrough=True))
    assert passthrough.principal({"authorization": f"Bearer {PROVIDER}", "x-ventana-key": KEY_B}).caller == B


def test_a_key_sent_on_every_request_is_hashed_once_and_still_told_apart() -> None:
    """A client's key digest is remembered (a sha256 after an idle loop is ~30-40 us where an idle vCPU
    halts); each key keeps its own digest, and a wrong key is still refused."""
    import hashlib

    admission = _on()
    hash_key.cache_clear()
    for _ in range(3):
        assert admission.principal({"authorization": f"Bearer {KEY_A}"}).caller == A
    assert admission.principal({"x-api-key": KEY_B}).caller == B
    info = hash_key.cache_info()
    assert (info.misses, info.hits) == (2, 2)
    assert hash_key(KEY_A) == hashlib.sha256(KEY_A.encode()).hexdigest()
    with pytest.raises(AuthError):
        admission.principal({"authorization": "Bearer vk-adm-a-0124"})
