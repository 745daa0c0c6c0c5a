"""The session a client names itself: the gateway's header, Claude Code's header or its metadata."""

from __future__ import annotations

import pytest

from gateway.sessions.identify import client_session

CURRENT = '{"device_id":"cbbf2b","account_uuid":"","session_id":"fbe2a1e5-94fb-4be0-a558-1f2d01524bb8"}'
OLDER = "user_9f3a_account__session_0c1d2e3f-aaaa-bbbb-cccc-1234567890ab"


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"x-session-id": "mine", "x-claude-code-session-id": "cc"}, {}, "mine"),
        ({"x-claude-code-session-id": " cc-1 "}, {"metadata": {"user_id": CURRENT}}, "cc-1"),
        ({}, {"metadata": {"user_id": CURRENT}}, "fbe2a1e5-94fb-4be0-a558-1f2d01524bb8"),
        ({}, {"metadata": {"user_id": OLDER}}, "0c1d2e3f-aaaa-bbbb-cccc-1234567890ab"),
        ({}, {"metadata": {"user_id": "user-7"}}, None),
        ({}, {"metadata": {"user_id": '{"session_id": '}}, None),
        ({}, {}, None),
    ],
)
def test_the_clients_own_session_name_is_found(headers: dict[str, str], body: dict, expected: str | None) -> None:
    assert client_session(headers, body=body) == expected
