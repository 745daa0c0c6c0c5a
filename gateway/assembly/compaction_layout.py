"""How compaction reads a conversation: the protected edges, the middle, and stored checkpoints.

Shared by ``clear_tool_results``, ``compact_history`` and ``plan_compaction`` so all three
agree on what may change. The layout of a message list is:

    [system/developer ... first user]  head, never touched
    [middle]                           may be cleared or replaced by one summary
    [recent turns ... last user ...]   tail, never touched

The middle always ends where a user message starts, so it never splits an assistant
``tool_calls`` message from its results. It also stops before any system/developer
message that appears mid-conversation, since those are never touched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Context, Message, SessionState
from gateway.assembly.defuse_closers import defuse_closers
from gateway.assembly.message_text import system_indices, user_indices
from gateway.object_memo import ObjectMemo

#: Annotation key under which ``clear_tool_results`` keeps the originals of what it cleared.
ORIGINALS_KEY = "compaction_originals"
#: ``SessionState.extra`` key holding compaction's own per-session memory.
STATE_KEY = "compaction"


@dataclass(frozen=True, slots=True)
class Layout:
    head_end: int  # first index after the first user message
    tail_start: int  # first index of the protected recent turns

    @property
    def has_middle(self) -> bool:
        return self.tail_start > self.head_end


def layout(messages: Sequence[Message], policy: CompactionPolicy, counter: Any) -> Layout | None:
    """Locate head and tail; None when the conversation has no first user message."""
    users = user_indices(messages)
    if not users:
        return None
    head_end = users[0] + 1
    later = users[1:]  # the user messages after the first (indices ascend)
    if not later:
        return Layout(head_end, head_end)
    keep = min(policy.keep_recent_turns, len(later))
    tail_start = later[-keep]
    if policy.keep_recent_tokens:
        for start in reversed(later[: len(later) - keep]):
            if counter.messages(messages[tail_start:]) >= policy.keep_recent_tokens:
                break
            tail_start = start
    for i in system_indices(messages):
        if head_end <= i < tail_start:
            later_users = [u for u in later if u <= i]
            tail_start = later_users[-1] if later_users else head_end
            break
    return Layout(head_end, max(head_end, tail_start))


#: Digests by message object: a resent history is last turn's objects (``sessions.resent``).
_DIGESTS: ObjectMemo[bytes] = ObjectMemo()


def message_digest(message: Message) -> bytes:
    """A stable digest of one message (sorted keys: equal JSON objects give equal digests)."""
    return _DIGESTS.get_or(message, _digest)


def _digest(message: Message) -> bytes:
    return hashlib.sha256(orjson.dumps(message, option=orjson.OPT_SORT_KEYS)).digest()


def range_hash(messages: Sequence[Message]) -> str:
    """The key of a checkpoint: changing one byte of any message in the range changes it."""
    h = hashlib.sha256()
    for m in messages:
        h.update(message_digest(m))
    return h.hexdigest()[:32]


def matching_checkpoints(messages: Sequence[Message], lay: Layout, state: SessionState) -> list[Checkpoint]:
    """Stored checkpoints whose range the incoming history still starts with, nearest end last."""
    found: list[Checkpoint] = []
    for cp in sorted(state.checkpoints, key=lambda c: c.end):
        in_middle = cp.start == lay.head_end and lay.head_end < cp.end <= lay.tail_start
        if in_middle and range_hash(messages[cp.start : cp.end]) == cp.range_hash:
            found.append(cp)
    return found


def summary_message(cp: Checkpoint) -> dict[str, str]:
    """The one message that stands in for a checkpoint's range: same checkpoint, same bytes."""
    body = defuse_closers(cp.summary)
    head = f'<summary of="messages {cp.start}-{cp.end - 1}" by="{cp.summarizer}">'
    return {"role": "user", "content": f"{head}\n{body}\n</summary>"}


def apply_checkpoint(messages: Sequence[Message], cp: Checkpoint) -> tuple[Message, ...]:
    return (*messages[: cp.start], summary_message(cp), *messages[cp.end :])


def token_limit(ctx: Context, share: float) -> int:
    return int(share * ctx.env.context_window)


def reserve(ctx: Context, policy: CompactionPolicy) -> int:
    """Tokens kept free for the answer: the request's own max tokens, else the policy's reserve."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = ctx.params.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return policy.reserve_tokens


def request_tokens(ctx: Context, messages: Sequence[Message], policy: CompactionPolicy) -> int:
    """What the trigger compares: tools + messages + generation reserve."""
    return ctx.env.counter.request(messages, ctx.tools) + reserve(ctx, policy)


def original_messages(ctx: Context) -> tuple[Message, ...]:
    """The client's messages with any cleared tool results restored (hashes and summaries use these)."""
    originals: Mapping[int, Message] = ctx.annotations.get(ORIGINALS_KEY) or {}
    if not originals:
        return ctx.messages
    return tuple(originals.get(i, m) for i, m in enumerate(ctx.messages))


def compaction_memory(state: SessionState) -> Mapping[str, Any]:
    memory = state.extra.get(STATE_KEY)
    return memory if isinstance(memory, Mapping) else {}


def with_memory(state: SessionState, **changes: Any) -> dict[str, Any]:
    """``state.extra`` with compaction's entry updated (other passes' entries untouched)."""
    return {**state.extra, STATE_KEY: {**compaction_memory(state), **changes}}


def best_application(
    ctx: Context, originals: Sequence[Message], lay: Layout, policy: CompactionPolicy
) -> tuple[Checkpoint | None, tuple[Message, ...]]:
    """The checkpoint ``compact_history`` reuses this turn, and ``ctx.messages`` with it applied.

    The active checkpoint (the one the previous turn sent) while it keeps the prompt under
    the threshold, so the prefix stays byte-identical; else the furthest matching one
    (e.g. prepared in the background) once the prompt is over the threshold; else none.
    """
    messages = tuple(ctx.messages)
    if not policy.reuse_checkpoints:
        return None, messages
    found = matching_checkpoints(originals, lay, ctx.session)
    if not found:
        return None, messages
    limit = token_limit(ctx, policy.threshold)
    active = [cp for cp in found if cp.range_hash == compaction_memory(ctx.session).get("active")]
    if active:
        applied = apply_checkpoint(messages, active[0])
        if request_tokens(ctx, applied, policy) <= limit:
            return active[0], applied
    elif request_tokens(ctx, messages, policy) <= limit:
        return None, messages
    return found[-1], apply_checkpoint(messages, found[-1])
