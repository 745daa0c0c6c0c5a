"""Recognise the history a client resends, so a turn costs what is new in it.

An agent resends its whole conversation every turn. Parsed, each message is a new object
with the same content, so every per-message fact the gateway memoises by identity (token
counts, content hashes, stubs; see ``gateway.object_memo``) would be recomputed for the
whole history on every turn. ``ResentHistory`` keeps the last turn's message objects per
session and swaps each resent message (equal in content at the same position) for the
object seen last turn. A message that changed (a system prompt with today's date, say) is
simply not swapped; the ones after it still are. Comparing equal dicts is a C-level walk, ~0.1 ms for
a 300-message, 100K-token history, where one Python pass over the same history costs
0.1-1 ms and a request makes a dozen of them.

The swap changes no value: a message is replaced only by an object equal to it. (Python
equality is a little looser than JSON text: ``1``, ``1.0`` and ``true`` compare equal, so a
client that changed only how a number inside a message is spelled would see last turn's
spelling forwarded; messages are text, so this is not a case clients produce.) Process-local and bounded; a
session it has forgotten just costs a full turn once. Runs on the event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: Sessions whose last turn is kept, and the request bytes they may add up to: the parsed
#: objects take 2-3x their JSON, so the default holds at most ~50 MB alive (~40 conversations
#: of 100K tokens; many more of ordinary size).
DEFAULT_SESSIONS = 512
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class ResentHistory:
    def __init__(self, sessions: int = DEFAULT_SESSIONS, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.sessions = sessions
        self.max_bytes = max_bytes
        self._bytes = 0
        self._last: OrderedDict[str, tuple[list[Any], Any, int]] = OrderedDict()

    def adopt(self, session_id: str, body: dict[str, Any], size: int, known: int = 0) -> int:
        """Swap the body's resent messages (and an unchanged tool list) for last turn's objects.

        ``size`` is the body's length in bytes; the first ``known`` messages are already a
        previous turn's objects (``api.incremental_parse``). Returns how many messages were
        recognised (at the same position, not necessarily contiguous).
        The body's message list becomes this session's last turn.
        """
        messages = body.get("messages")
        if messages.__class__ is not list:
            return 0
        tools = body.get("tools")
        last = self._last.pop(session_id, None)
        same = known
        if last is not None:
            previous, previous_tools, previous_size = last
            self._bytes -= previous_size
            for i in range(known, min(len(previous), len(messages))):
                old = previous[i]
                if old is messages[i] or old == messages[i]:
                    messages[i] = old
                    same += 1
            if tools is not None and tools is not previous_tools and tools == previous_tools:
                body["tools"] = tools = previous_tools
        if size <= self.max_bytes:
            self._last[session_id] = (messages, tools, size)
            self._bytes += size
        while self._last and (len(self._last) > self.sessions or self._bytes > self.max_bytes):
            self._bytes -= self._last.popitem(last=False)[1][2]
        return same

    def __len__(self) -> int:
        return len(self._last)
