"""Check that an assembled request is a faithful rewrite of the original (black's assert_equivalent).

The checks, each returning a sentence when it fails:
- every assistant tool call has its ``tool`` result and every result its call;
- system/developer messages are byte-identical unless a decision declared it changed them
  (``detail["changes_system"]``);
- the task (the first user message, when it comes before any tool round) is forwarded;
- the protected tail is verbatim and in order, followed only by gateway blocks (the
  reminder): from the last user message, or from the newest ``keep_rounds`` rounds when
  an agent loop runs after it (compaction may rewrite older rounds of that loop, never
  these). The exceptions are declared by decisions: a message declared shrunk
  (``detail["shrunk_digest"]``: the digest of the client's message, or
  ``detail["shrunk_message"]``: its original index) may stand there in a condensed form of the
  same role that makes the same calls (``condensed_form``): its text a ``<condensed`` gateway
  block, and before the newest round its calls' arguments stubs (``input_stubs``); a tool result
  of a round older than the newest one declared cleared (``cleared`` with
  ``detail["tool_call_id"]``) may stand there as its stub. The newest round
  (``newest_round_start``) keeps its calls and its results (only a result declared shrunk may
  differ, ``shrink_oversize``; only its reasoning may be condensed, ``condense_tail``): this is the
  one definition of what must stay verbatim, which the compaction passes read too;
- every other message is either one of the client's, unchanged and in the original order,
  or a block the gateway wrote, recognisable by its opening marker; when a ``cleared``
  decision declares ``detail["input_cleared"]``, an assistant message may differ from the
  client's by stubbed call arguments only (``input_stubs``: ids, names and order kept).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import orjson

from gateway.assembly.context import Context, Decision, Message
from gateway.assembly.input_stubs import same_but_arguments, same_calls
from gateway.history_fold import index_fold
from gateway.object_memo import same_objects

#: Openings of messages the gateway itself writes. A pass that inserts or rewrites a
#: message starts its content with one of these, so the check (and a person) can tell.
GATEWAY_MARKERS: tuple[str, ...] = (
    "<reminder>",
    "<summary",
    "<documents",
    "<recalled",
    "<memory",
    "[result of ",
    "<condensed",
)


def is_gateway_block(message: Message) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.startswith(GATEWAY_MARKERS)


def tool_pairing_problems(messages: Sequence[Message]) -> list[str]:
    """Name every tool call without its result and every result without its call."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            if open_calls:
                problems.append(f"tool call(s) {sorted(open_calls)} have no result before message {i}")
                open_calls = {}
            for call in m.get("tool_calls") or ():
                call_id = call.get("id") if hasattr(call, "get") else None
                if call_id:
                    open_calls[str(call_id)] = i
        elif role == "tool":
            call_id = str(m.get("tool_call_id"))
            if call_id not in open_calls:
                problems.append(f"tool result at message {i} answers no preceding call ({call_id})")
            else:
                del open_calls[call_id]
        elif open_calls and role in ("user", "system", "developer"):
            problems.append(f"tool call(s) {sorted(open_calls)} have no result before message {i}")
            open_calls = {}
    if open_calls:
        problems.append(f"tool call(s) {sorted(open_calls)} have no result")
    return problems


#: Where the user messages the client wrote are (not gateway blocks), per chunk of history.
client_user_indices = index_fold(lambda m: m.get("role") == "user" and not is_gateway_block(m))


def last_client_user(messages: Sequence[Message]) -> int:
    """Index of the last user message the client wrote (not a gateway block), or -1."""
    users = client_user_indices(messages)
    return users[-1] if users else -1


def comparable(message: Message) -> Message:
    """The message without cache breakpoints, a lone text part read as a plain string.

    ``place_cache_breakpoints`` turns ``"text"`` into ``[{"type": "text", "text": "text",
    "cache_control": ...}]``: the model sees the same words, so the checks compare this form.
    """
    content = message.get("content")
    if "cache_control" not in message and not isinstance(content, list):
        return message
    out = {k: v for k, v in message.items() if k != "cache_control"}
    if isinstance(content, list):
        parts = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, Mapping) else p for p in content]
        if len(parts) == 1 and isinstance(parts[0], Mapping) and set(parts[0]) == {"type", "text"}:
            out["content"] = parts[0]["text"] if parts[0]["type"] == "text" else parts
        else:
            out["content"] = parts
    return out


def protected_start(messages: Sequence[Message], keep_rounds: int | None) -> int:
    """Where the tail nothing may change starts: the last client user message or the newest rounds, the later.

    ``keep_rounds`` None (compaction off): from the last client user message. -1 when
    there is nothing to protect (no user message and no round).
    """
    rounds = -1
    if keep_rounds:  # walk back over the newest rounds only: a 400-round loop is not listed every check
        seen = 0
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "assistant":
                rounds, seen = i, seen + 1
                if seen == keep_rounds:
                    break
    return max(last_client_user(messages), rounds)


def newest_round_start(messages: Sequence[Message]) -> int:
    """Where the newest round starts: what stays verbatim even when the rest of the tail is condensed.

    The last client user message or the last assistant message, the later (-1: neither). Before it,
    the tail's older rounds may have their tool results cleared, declared by a ``cleared`` decision;
    from it on, only a message a decision declares shrunk may differ (``shrink_oversize``)."""
    return protected_start(messages, 1)


def shrunk_digest(message: Message) -> str:
    """How a decision names the client's message it shrank, wherever earlier passes moved it."""
    return hashlib.sha256(orjson.dumps(comparable(message), option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]


def declared_replaced(orig: Sequence[Message], decisions: Sequence[Decision], start: int) -> set[int]:
    """Indices (``>= start``) of the client's messages a decision declares replaced by a gateway block.

    Shrunk messages (by digest, else by original index) anywhere; cleared tool results only before
    the newest round (``newest_round_start``), which stays verbatim."""
    out: set[int] = set()
    digests = {str(d.detail["shrunk_digest"]) for d in decisions if "shrunk_digest" in d.detail}
    out |= {
        int(d.detail["shrunk_message"])
        for d in decisions
        if "shrunk_message" in d.detail and "shrunk_digest" not in d.detail
    }
    if digests:
        out |= {i for i in range(start, len(orig)) if shrunk_digest(orig[i]) in digests}
    cleared = {str(d.detail["tool_call_id"]) for d in decisions if d.action == "cleared" and "tool_call_id" in d.detail}
    if cleared:
        newest = newest_round_start(orig)
        out |= {
            i
            for i in range(start, newest)
            if orig[i].get("role") == "tool" and str(orig[i].get("tool_call_id")) in cleared
        }
    return out


def _task(messages: Sequence[Message]) -> int:
    """Index of the task (first client user message before any tool round), or -1."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("tool_calls"):
            return -1
        if m.get("role") == "user" and not is_gateway_block(m):
            return i
    return -1


def _comparable_all(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """``comparable`` of each message; the context's own tuple when that changes none (no breakpoints yet):
    the history's chunks are then the ones the passes found (``history_fold``). A new list, made per call, was
    cut into chunks again for each question asked of it, twice a check (~30-80 us at 287 messages)."""
    made = tuple(map(comparable, messages))
    return messages if same_objects(made, messages) else made


def verify_assembly(
    original: Context, assembled: Context, decisions: Sequence[Decision], *, keep_rounds: int | None = None
) -> list[str]:
    """Return the problems found (empty when the assembled request is safe to send)."""
    orig = _comparable_all(original.messages)
    new = _comparable_all(assembled.messages)
    problems: list[str] = []
    # A gateway block stays in the pairing when it is a result or carries calls (an older round's assistant
    # message whose reasoning was condensed keeps its calls: ``condense_reasoning``).
    pairing = tool_pairing_problems(
        [m for m in new if not is_gateway_block(m) or m.get("role") == "tool" or m.get("tool_calls")]
    )
    if pairing and not tool_pairing_problems(orig):  # a pass broke a pair the client had kept
        problems += pairing
    system_changed = any(d.detail.get("changes_system") for d in decisions)
    if not system_changed:
        # Gateway blocks are left out on both sides (e.g. a ``<memory`` system block a run put there).
        old_sys = [m for m in orig if m.get("role") in ("system", "developer") and not is_gateway_block(m)]
        new_sys = [m for m in new if m.get("role") in ("system", "developer") and not is_gateway_block(m)]
        if old_sys != new_sys:
            problems.append("system/developer messages changed without a decision saying so")
    last = protected_start(orig, keep_rounds)
    task = _task(orig)
    shrunk = declared_replaced(orig, decisions, min(x for x in (last, task, len(orig)) if x >= 0))
    if task >= 0 and task not in shrunk and not any(m is orig[task] or m == orig[task] for m in new):
        problems.append("the task (first user message) is not forwarded verbatim")
    if last >= 0:
        tail = [orig[i] for i in range(last, len(orig))]
        newest = newest_round_start(orig)
        replaced = [_VERBATIM if i not in shrunk else _OLDER if i < newest else _NEWEST for i in range(last, len(orig))]
        found = _find_run(new, tail, replaced)
        if found < 0:
            problems.append("the last user turn or the newest rounds are not forwarded verbatim")
        elif not all(is_gateway_block(m) for m in new[found + len(tail) :]):
            problems.append("something other than gateway blocks follows the last user turn or the newest rounds")
    inputs = any(d.detail.get("input_cleared") for d in decisions)
    problems += _order_problems(orig, new, inputs)
    return problems


#: How a message of the protected tail may differ from the client's (``_find_run``).
_VERBATIM, _NEWEST, _OLDER = 0, 1, 2


def _find_run(haystack: Sequence[Message], run: list[Message], replaced: list[int]) -> int:
    """Index where ``run`` occurs in order; a declared-replaced message may stand there in its condensed form."""
    n = len(run)
    for start in range(len(haystack) - n, -1, -1):
        if all(_same(haystack[start + k], run[k], replaced[k]) for k in range(n)):
            return start
    return -1


def _same(found: Message, expected: Message, replaced: int) -> bool:
    """The client's message, or where a decision declared it replaced, its condensed form (``condensed_form``).

    Declared by digest, a replacement names every copy of the message (a chat repeats replies byte for
    byte): a copy the pass left as it was is the client's message, and still passes."""
    if found is expected or found == expected:
        return True
    return replaced != _VERBATIM and condensed_form(found, expected, stubs=replaced == _OLDER)


def condensed_form(sent: Message, original: Message, *, stubs: bool) -> bool:
    """Whether ``sent`` may stand for the client's ``original`` once a decision declared it condensed.

    The same role; its text the client's or a gateway block (``<condensed``, a result's stub); the same
    calls, ids and names in order (``input_stubs.same_calls``), their arguments the client's or, with
    ``stubs`` (an older round of the tail, never the newest), stubs made by the gateway. So every call
    keeps its result, and what the newest round asks for is what the client sent."""
    if sent.get("role") != original.get("role") or sent.get("tool_call_id") != original.get("tool_call_id"):
        return False
    if not is_gateway_block(sent) and sent.get("content") != original.get("content"):
        return False
    return same_calls(original, sent, stubs=stubs)


def _order_problems(orig: Sequence[Message], new: Sequence[Message], inputs: bool) -> list[str]:
    """Every non-gateway message must be an original message, in the original order.

    ``inputs``: a decision declared cleared call arguments (an assistant message may then differ
    from the client's by stubbed arguments only)."""
    position, n = 0, len(orig)
    for i, m in enumerate(new):
        if position < n and orig[position] is m:
            position += 1  # the common case: the client's next message, as it came
            continue
        if is_gateway_block(m):
            continue
        if m.get("role") in ("system", "developer"):
            continue  # checked above, against the decisions
        while position < n and not _is_original(orig, position, m, inputs):
            position += 1
        if position == n:
            return [f"message {i} ({m.get('role')}) is neither the client's nor a marked gateway block"]
        position += 1
    return []


def _is_original(orig: Sequence[Message], position: int, m: Message, inputs: bool) -> bool:
    found = orig[position]
    if found is m or found == m:
        return True
    return inputs and same_but_arguments(found, m)
