"""How compaction reads a conversation: the protected edges, the middle, and stored checkpoints.

Shared by ``clear_tool_results``, ``compact_history`` and ``plan_compaction`` so all three
agree on what may change. The layout of a message list is:

    [system/developer ... task]   head, never touched (the task is the first user message, if any)
    [middle]                      older complete rounds: may be cleared or replaced by one summary
    [newest rounds ...]           tail, never touched

A *round* is an assistant message with all its tool results; a user message belongs to
the round it prompts. The tail holds at least ``keep_recent_rounds`` rounds and
``keep_recent_tokens`` tokens (a chat with no more rounds than that keeps its last
``keep_recent_turns`` user turns instead), and a long agent loop inside one user turn is split
like any other history (hundreds of tool rounds after one task, or after none at all
when the task is in the system prompt). Every boundary is where a message other than
a tool result starts, so a ``tool_calls`` message always stays or goes with its results.
The middle also stops before any system/developer message that appears mid-conversation,
since those are never touched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from gateway.assembly.compaction_policy import CompactionPolicy, with_sized_ceiling
from gateway.assembly.condense_reasoning import condensed_reasoning
from gateway.assembly.context import Checkpoint, Context, Message, SessionState
from gateway.assembly.defuse_closers import defuse_closers
from gateway.assembly.message_text import SYSTEM_ROLES, system_indices, user_indices
from gateway.assembly.verify_assembly import last_client_user, newest_round_start
from gateway.object_memo import ObjectMemo

#: Annotation key under which ``clear_tool_results`` keeps the originals of what it cleared.
ORIGINALS_KEY = "compaction_originals"
#: ``SessionState.extra`` key holding compaction's own per-session memory.
STATE_KEY = "compaction"
#: Tokens a summary message adds beyond its text (the ``<summary ...>`` frame), for planning.
SUMMARY_FRAME_TOKENS = 40


@dataclass(frozen=True, slots=True)
class Layout:
    head_end: int  # first index after the system prompt and the task
    tail_start: int  # first index of the protected newest rounds

    @property
    def has_middle(self) -> bool:
        return self.tail_start > self.head_end


def head_end(messages: Sequence[Message]) -> int:
    """End of the head: the leading system/developer messages and the task, if it comes before any tool round,
    with the system messages right after the task (Claude Code sends its agent and skill lists there)."""
    users = user_indices(messages)
    n = 0
    if users and not any(m.get("tool_calls") for m in messages[: users[0]] if m.get("role") == "assistant"):
        n = users[0] + 1
    while n < len(messages) and messages[n].get("role") in SYSTEM_ROLES:
        n += 1
    return n


def _round_start(messages: Sequence[Message], head: int, keep: int) -> int:
    """Start of the newest ``keep`` rounds, with the user messages that prompted the oldest of them.

    Walks back from the end: a long loop's turn costs its newest rounds, not its whole history."""
    start, found = head, 0
    for i in range(len(messages) - 1, head - 1, -1):
        if messages[i].get("role") == "assistant":
            found += 1
            if found == keep:
                start = i
                break
    if found < keep or not any(messages[i].get("role") == "assistant" for i in range(start - 1, head - 1, -1)):
        return head  # no older round than the newest ``keep``: nothing to keep apart
    while start > head and messages[start - 1].get("role") == "user":
        start -= 1
    return start


def _turn_start(messages: Sequence[Message], head: int, keep: int) -> int:
    later = [u for u in user_indices(messages) if u >= head]
    return later[-min(keep, len(later))] if later else head


def layout(messages: Sequence[Message], policy: CompactionPolicy, counter: Any) -> Layout | None:
    """Locate head and tail; None when there is nothing but the head."""
    head = head_end(messages)
    if head >= len(messages):
        return None
    rounds = _round_start(messages, head, policy.keep_recent_rounds)
    # Enough rounds: the newest keep_recent_rounds are the tail. A short chat with few rounds
    # (long user messages) falls back to its newest keep_recent_turns user turns.
    tail_start = rounds if rounds > head else _turn_start(messages, head, policy.keep_recent_turns)
    if policy.keep_recent_tokens and tail_start > head:
        kept = counter.messages(messages[tail_start:])
        while tail_start > head and kept < policy.keep_recent_tokens:
            tail_start -= 1
            kept += counter.message(messages[tail_start])
            while tail_start > head and messages[tail_start].get("role") == "tool":
                tail_start -= 1
                kept += counter.message(messages[tail_start])
    for i in system_indices(messages):
        if head <= i < tail_start:
            tail_start = i
            break
    return Layout(head, max(head, tail_start))


def boundaries(messages: Sequence[Message], lo: int, hi: int) -> list[int]:
    """Indices in ``(lo, hi]`` where a middle may end: never right before a tool result."""
    return [i for i in range(lo + 1, hi + 1) if i == len(messages) or messages[i].get("role") != "tool"]


#: A threshold the head alone makes unreachable is raised, but never past this share of the window,
#: or of what the head leaves when the head alone is past it (``threshold_ceiling``).
RAISED_THRESHOLD_CAP = 0.8
#: Past this share of the window the head counts as filling it: the ceiling is the head plus the cap's
#: share of what it leaves, not the cap (``threshold_ceiling``).
HEAD_PAST_SHARE = 0.5
#: An unset summary ceiling is at most this share of what the head leaves of the window (``for_head``).
SUMMARY_ROOM_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Watermarks:
    """The policy's shares of the window, in tokens, for this request."""

    threshold: int
    target: int
    prepare: int


def watermarks(ctx: Context, lay: Layout, policy: CompactionPolicy) -> Watermarks:
    """The watermarks in tokens; raised when the head alone makes the threshold unreachable.

    When what a compaction can land at (``landing_floor``: the head, a full-size summary, the tail's
    older rounds condensed and the newest round) is past the target, compacting on every turn could
    hardly get under it and would only rewrite the prefix each time. Then the threshold moves up to
    ``threshold_ceiling`` (``RAISED_THRESHOLD_CAP`` of the window, or of what the head leaves), and
    target and prepare_at with it, the target-to-threshold band kept. A target raised only to the
    head would sit below what any compaction lands at: each one would land between target and
    threshold and the next come a few rounds later.

    The raised threshold does not follow the floor itself (it was ``floor + band`` up to the ceiling):
    the floor counts the newest round, so the threshold moved with each round's size, and a small
    round after a large one lowered it under a request that had only grown by that round, and a
    compaction (or a clearing batch) came a turn or two after the last. The ceiling depends on the
    head alone, so it stays put: rewrites 19 -> 15 (generated coding loop, 16K), 32 -> 30 (8K),
    31 -> 29 (mini-swe-agent, 8K), the other agent-loop rows unchanged.
    """
    threshold, target = token_limit(ctx, policy.threshold), token_limit(ctx, policy.target)
    prepare = token_limit(ctx, policy.prepare_at)
    floor = landing_floor(ctx, lay, policy)
    if floor <= target:
        return Watermarks(threshold, target, prepare)
    shift = max(threshold, threshold_ceiling(ctx, lay, policy)) - threshold
    return Watermarks(threshold + shift, target + shift, prepare + shift)


def threshold_ceiling(ctx: Context, lay: Layout, policy: CompactionPolicy) -> int:
    """How high a raised threshold may go: ``RAISED_THRESHOLD_CAP`` of the window, or of what the head leaves.

    A head past the cap (tau2's system prompt and tools are 6.7K of an 8K window) put the threshold
    below the head itself: every turn was over it and compacted again (97 rewrites for 101 requests),
    each landing far above the threshold. The head is never compacted, so it is not counted against
    the room the cap keeps free: the ceiling is the head plus the cap's share of what it leaves.
    A head under half the window (``HEAD_PAST_SHARE``) keeps the cap: that is also ``shrink_oversize``'s
    line (``direct_fraction``), and a threshold past it let shrink condense a result on the turns in
    between, a rewrite each (mini-swe-agent at 6K: 60 -> 66). Past the cap, shrinking one message can
    never bring the request under that line, so shrink leaves it alone short of the window. Between half
    the window and the cap the head is raised the same way: the line was the cap itself, so a head just
    under it (tau2 at 8K with its tools pruned to 5.9K, ``prune_tools._prune_for_fit``) had a threshold
    ~500 tokens above it, under any landing, and compacted on every turn (97 rewrites for 101 requests);
    it now has the room a head just past the cap has (9 rewrites). No agent-loop row with a head under
    half its window changes; tau2 solo at 16K (a head past half of it) keeps its 0 rewrites.
    """
    window = ctx.env.context_window
    cap = int(RAISED_THRESHOLD_CAP * window)
    head = head_tokens(ctx, lay, policy)
    return cap if head <= HEAD_PAST_SHARE * window else head + int(RAISED_THRESHOLD_CAP * max(0, window - head))


def head_tokens(ctx: Context, lay: Layout, policy: CompactionPolicy) -> int:
    """What no compaction changes: the head (system prompt, tool definitions, task) and the reply's reserve."""
    return ctx.env.counter.request(ctx.messages[: lay.head_end], ctx.tools) + reserve(ctx, policy)


def for_head(ctx: Context, lay: Layout, policy: CompactionPolicy) -> CompactionPolicy:
    """``policy`` with an unset summary ceiling at most ``SUMMARY_ROOM_SHARE`` of what the head leaves.

    ``for_window`` sizes the ceiling to the window (640 at 8K); behind a head that fills most of the
    window (tau2 at 8K leaves 1.3K) a summary that size, with the newest rounds, is past any threshold
    the room allows, so every compaction landed over it and the next turn compacted again. A summary
    priced to the room lets a compaction land low enough that the next one is a real growth step away.
    A ceiling set in the config is the operator's and is kept; a head that leaves most of the window
    changes nothing (a quarter of it is over the window's ceiling).
    """
    if "summary_max_tokens" in policy.model_fields_set:
        return policy
    room = ctx.env.context_window - head_tokens(ctx, lay, policy)
    ceiling = max(MIN_ROOM_SUMMARY_TOKENS, int(SUMMARY_ROOM_SHARE * room))
    if ceiling >= policy.summary_max_tokens:
        return policy
    return _with_ceiling(policy, ceiling)


#: A summary ceiling ``for_head`` never goes under (a summary shorter than this says too little).
MIN_ROOM_SUMMARY_TOKENS = 128


@lru_cache(maxsize=256)
def _with_ceiling(policy: CompactionPolicy, ceiling: int) -> CompactionPolicy:
    """One copy per policy and ceiling: a cramped session asks for the same one on every turn."""
    return with_sized_ceiling(policy, ceiling)


def landing_floor(ctx: Context, lay: Layout, policy: CompactionPolicy) -> int:
    """The fewest tokens a compaction can land at: head, a full-size summary and the newest round.

    The tail's older rounds can be cleared (``condense_tail``), the newest round cannot. A target
    below this cannot be reached: every turn would compact again (mini-swe-agent at 6K, whose task
    alone is 1.4K tokens of a 1.5K target, summarised on every turn), so the watermarks move up.
    Without a middle or a tail there is nothing to land: the head alone is the floor.
    """
    counter, messages = ctx.env.counter, ctx.messages
    head = counter.request(messages[: lay.head_end], ctx.tools) + reserve(ctx, policy)
    if not lay.has_middle and lay.tail_start >= len(messages):
        return head
    newest = max(newest_round_start(messages), lay.head_end)
    if last_client_user(messages) >= newest:
        return head  # a user turn ends the request, no loop runs: its tail is kept whole, as it always was
    summary = 0
    if "summarize" in policy.strategies:  # at most its ceiling, at most what it replaces
        middle = counter.messages(messages[lay.head_end : lay.tail_start])
        summary = min(policy.summary_max_tokens + SUMMARY_FRAME_TOKENS, middle)
    # The tail's older rounds as condense_tail leaves them: large results as stubs, long reasoning condensed,
    # long call arguments stubbed (where condense_tail stubs them: with a summary or clear_tool_inputs).
    inputs = policy.clear_tool_inputs or "summarize" in policy.strategies
    keep = frozenset(policy.never_clear)
    older = 0
    for m in messages[lay.tail_start : newest]:
        size = counter.message(m)
        if m.get("role") == "tool" and size > 2 * STUB_ESTIMATE_TOKENS:
            size = STUB_ESTIMATE_TOKENS
        elif m.get("role") == "assistant":
            made = condensed_reasoning(m, counter, arguments=inputs, keep=keep)
            size = min(size, counter.message(made)) if made is not None else size
        older += size
    return head + older + counter.messages(messages[newest:]) + summary


#: What a cleared result costs at most, for planning (a stub names the tool, arguments and facts).
STUB_ESTIMATE_TOKENS = 80


def compaction_floor(ctx: Context, lay: Layout, policy: CompactionPolicy) -> int:
    """The fewest tokens a compaction can be planned to leave: head, newest rounds and a full-size summary."""
    counter, messages = ctx.env.counter, ctx.messages
    kept = counter.request(messages[: lay.head_end], ctx.tools) + counter.messages(messages[lay.tail_start :])
    summary = policy.summary_max_tokens + SUMMARY_FRAME_TOKENS if "summarize" in policy.strategies else 0
    return kept + reserve(ctx, policy) + summary


def choose_end(ctx: Context, lay: Layout, policy: CompactionPolicy, limit: int, floor: int = 0) -> int:
    """Where a summary starting at the head should end so the request lands at ``limit`` tokens.

    The earliest boundary that does it (keeping as many rounds verbatim as fit: hysteresis,
    not the least possible), at least ``floor``; the end of the middle when none does.
    The summary is priced at its ceiling, ``summary_max_tokens``.
    """
    counter, messages = ctx.env.counter, ctx.messages
    fixed = counter.request(messages[: lay.head_end], ctx.tools) + reserve(ctx, policy)
    fixed += policy.summary_max_tokens + SUMMARY_FRAME_TOKENS
    suffix = counter.messages(messages[lay.tail_start :])
    ends = boundaries(messages, max(lay.head_end, floor - 1), lay.tail_start)
    suffix_at: dict[int, int] = {}
    for i in range(lay.tail_start - 1, max(lay.head_end, floor - 1), -1):
        suffix += counter.message(messages[i])
        suffix_at[i] = suffix
    for e in ends:
        if e >= lay.tail_start or fixed + suffix_at.get(e, 0) <= limit:
            return e
    return lay.tail_start


#: Digests by message object: a resent history is last turn's objects (``sessions.resent``).
#: Process-wide and pure: a hash of the message's content alone (no encoding, no policy).
_DIGESTS: ObjectMemo[bytes] = ObjectMemo()


def message_digest(message: Message) -> bytes:
    """A stable digest of one message (sorted keys: equal JSON objects give equal digests)."""
    return _DIGESTS.get_or(message, _digest)


def _digest(message: Message) -> bytes:
    return hashlib.sha256(orjson.dumps(message, option=orjson.OPT_SORT_KEYS)).digest()


def range_hash(messages: Sequence[Message]) -> str:
    """The key of a checkpoint: changing one byte of any message in the range changes it.

    Asked on every turn of a compacted session for each stored checkpoint, by two passes (~90 us at
    a 100K-token history, chaining a digest per message): remembered by the range's message objects,
    which a resent history keeps (``sessions.resent``)."""
    held = tuple(messages)
    key = tuple(map(id, held))
    found = _RANGES.get(key)
    if found is not None:  # the entry holds its messages alive, so these ids are those very objects
        return found[1]
    h = hashlib.sha256()
    for m in held:
        h.update(message_digest(m))
    digest = h.hexdigest()[:32]
    if len(_RANGES) >= RANGE_LIMIT:
        _RANGES.clear()
    _RANGES[key] = (held, digest)
    return digest


#: Ranges remembered by ``range_hash``: a few checkpoints for each of as many sessions as the other memos hold.
RANGE_LIMIT = 256
#: Process-wide and pure, like ``_DIGESTS``: message identities -> (the messages, kept alive; their range hash).
_RANGES: dict[tuple[int, ...], tuple[tuple[Message, ...], str]] = {}


def matching_checkpoints(messages: Sequence[Message], lay: Layout, state: SessionState) -> list[Checkpoint]:
    """Stored checkpoints whose range the incoming history still starts with, nearest end last."""
    found: list[Checkpoint] = []
    for cp in sorted(state.checkpoints, key=lambda c: c.end):
        in_middle = cp.start == lay.head_end and lay.head_end < cp.end <= lay.tail_start
        if in_middle and range_hash(messages[cp.start : cp.end]) == cp.range_hash:
            found.append(cp)
    return found


def summary_message(cp: Checkpoint) -> dict[str, str]:
    """The one message that stands in for a checkpoint's range: same checkpoint, same bytes.

    And the same object: each turn of a compacted session applies its checkpoint two or three times,
    and a message made afresh each time was ~75 us of escaping a long summary, plus a new object that
    every per-message and per-chunk memo after it (counts, transcript, prefix keys) missed. Messages are
    never mutated once made, so one object can stand for the checkpoint in every request."""
    return _summary_message(cp.start, cp.end, cp.summarizer, cp.summary)


@lru_cache(maxsize=RANGE_LIMIT)  # process-wide and pure: the message is its checkpoint's values alone
def _summary_message(start: int, end: int, summarizer: str, summary: str) -> dict[str, str]:
    head = f'<summary of="messages {start}-{end - 1}" by="{summarizer}">'
    return {"role": "user", "content": f"{head}\n{defuse_closers(summary)}\n</summary>"}


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


#: ``compaction_memory`` entries a later turn carries over: an active summary, cleared results, condensed
#: assistant messages (their text, their call arguments). Each is reapplied whatever the request's size.
CARRIED_OVER = ("active", "cleared", "condensed", "inputs")


def nothing_to_compact(ctx: Context, policy: CompactionPolicy, share: float) -> bool:
    """Whether the request is at most ``share`` of the window and nothing compacted earlier is carried over.

    Watermarks are only ever raised (``watermarks``), so a request under the policy's own ``share`` is
    under the watermark it names whatever the head and the landing floor; with no summary, clearing or
    condensing to reapply, a compaction pass has nothing to do. Decided from the request's token count
    (memoised per message; a bound when it tells, ``tokens_within``) before ``layout`` and ``watermarks``,
    which walk the whole history: three passes did that on every turn of a session far below its window
    (~0.1-0.3 ms each at 100K tokens)."""
    memory = compaction_memory(ctx.session)
    if any(memory.get(key) for key in CARRIED_OVER):
        return False
    return tokens_within(ctx, policy, token_limit(ctx, share))


def request_tokens(ctx: Context, messages: Sequence[Message], policy: CompactionPolicy) -> int:
    """What the trigger compares: tools + messages + generation reserve."""
    return ctx.env.counter.request(messages, ctx.tools) + reserve(ctx, policy)


def tokens_within(ctx: Context, policy: CompactionPolicy, limit: int) -> bool:
    """``request_tokens(ctx, ctx.messages, policy) <= limit``, with text not counted yet encoded only when a
    bound cannot tell (``Context.prompt_tokens_within``)."""
    return ctx.prompt_tokens_within(limit - reserve(ctx, policy))


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
    limit = watermarks(ctx, lay, policy).threshold
    active = [cp for cp in found if cp.range_hash == compaction_memory(ctx.session).get("active")]
    if active:
        applied = apply_checkpoint(messages, active[0])
        if request_tokens(ctx, applied, policy) <= limit:
            return active[0], applied
    elif request_tokens(ctx, messages, policy) <= limit:
        return None, messages
    return found[-1], apply_checkpoint(messages, found[-1])
