"""Rows to put in a database at a given revision before upgrading it to the head.

When a revision changes existing data, add the revision before it here with rows in
that revision's schema; ``test_migrate_from_every_revision`` inserts them and checks
they survive the upgrade. Revision 0001 is the first schema: its seed is one request.
"""

from __future__ import annotations

from typing import Any

SEEDS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "0001": {
        "blobs": [
            {
                "hash": "a" * 64,
                "kind": "message",
                "size": 30,
                "content": '{"content":"hi","role":"user"}',
                "created_at": 1.0,
            }
        ],
        "message_nodes": [{"hash": "b" * 64, "parent": "", "message": "a" * 64, "depth": 1}],
        "requests": [
            {
                "request_id": "req-seed",
                "session_id": "s-seed",
                "created_at": 1.0,
                "model": "gpt-4o-mini",
                "provider": "openai",
                "caller": "anonymous",
                "stream": False,
                "turn": 1,
                "replay_of": None,
                "status": 200,
                "error": None,
                "original_head": "b" * 64,
                "original_count": 1,
                "original_tools": None,
                "original_params": '{"model": "gpt-4o-mini"}',
                "assembled_head": "b" * 64,
                "assembled_count": 1,
                "assembled_tools": None,
                "assembled_params": '{"model": "gpt-4o-mini"}',
                "decisions": "[]",
                "answer": None,
                "response_meta": None,
                "finish_reason": "stop",
                "prompt_tokens": 8,
                "completion_tokens": 2,
                "cached_tokens": 0,
                "cache_write_tokens": 0,
                "tokens_original": 8,
                "tokens_assembled": 8,
                "overhead_ms": 0.5,
                "ttfb_ms": 3.0,
                "total_ms": 9.0,
                "budget": None,
            }
        ],
    }
}
