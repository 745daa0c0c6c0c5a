"""Count tokens the way an OpenAI chat model bills them, in time proportional to what is new.

A chat request is billed as: for every message a fixed overhead (``<|im_start|>``,
``<|im_end|>`` and a separator), the role, an optional name, the content text and
any tool calls; three tokens priming the reply; and the tool definitions rendered
the way OpenAI renders them (a TypeScript-like namespace) at the front.

Agents resend their whole history every turn, so counts are memoised per piece of
text: counting a turn costs in proportion to the text not seen before. The same
rendering is used by ``providersim`` to produce the token sequence it caches, so the
gateway and the simulator agree by construction on what a message costs, and the
tests check that they do.

Encodings: ``o200k_base`` for the GPT-4o / 4.1 / 4.5 / 5 and o-series families,
``cl100k_base`` for GPT-4 and GPT-3.5; any other model (Claude, Gemini, open models)
falls back to ``o200k_base`` and relies on the calibration in ``calibration.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any

import orjson
import tiktoken

from gateway.history_fold import CHUNK, Chunk, HistoryFold
from gateway.json_memo import memo_by_json
from gateway.object_memo import ObjectMemo

#: dict first: parsed JSON is always dicts, and an ABC isinstance check costs ~10x more.
_MAP = (dict, Mapping)
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3
TOOLS_OVERHEAD = 12
IMAGE_TOKENS = 85  # low-detail image; the gateway never fetches images to measure them
DEFAULT_ENCODING = "o200k_base"
_CACHE_LIMIT = 200_000

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding")


def encoding_for_model(model: str) -> str:
    """Name the tiktoken encoding for a model id (provider prefix allowed)."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return DEFAULT_ENCODING


def is_openai_model(model: str) -> bool:
    """Whether tiktoken has this model's own tokenizer (so counts need no calibration)."""
    name = model.rsplit("/", 1)[-1].lower()
    return name.startswith(_O200K_PREFIXES + _CL100K_PREFIXES)


# Process-wide and pure: a tiktoken encoding by name (its tables load once a process).
@lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def content_text(content: Any) -> tuple[str, int]:
    """Return the text of a message content and the number of images in it."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts: list[str] = []
        images = 0
        for part in content:
            if not isinstance(part, _MAP):
                continue
            kind = part.get("type")
            if kind == "text" or kind == "input_text":
                texts.append(str(part.get("text", "")))
            elif kind in ("image_url", "input_image", "image") or kind == "input_audio":
                images += 1
            elif kind == "refusal":
                texts.append(str(part.get("refusal", "")))
        return "".join(texts), images
    return str(content), 0


def message_pieces(message: Mapping[str, Any]) -> tuple[list[str], int]:
    """Return the texts a message is billed for (besides fixed overhead) and its image count."""
    pieces = [str(message.get("role", ""))]
    text, images = content_text(message.get("content"))
    pieces.append(text)
    if message.get("name"):
        pieces.append(str(message["name"]))
    for call in message.get("tool_calls") or ():
        if isinstance(call, _MAP):
            fn = call.get("function") or {}
            if isinstance(fn, _MAP):
                pieces.append(str(fn.get("name", "")))
                pieces.append(str(fn.get("arguments", "")))
    if message.get("tool_call_id"):
        pieces.append(str(message["tool_call_id"]))
    return pieces, images


def message_overhead(message: Mapping[str, Any]) -> int:
    return MESSAGE_OVERHEAD + (NAME_OVERHEAD if message.get("name") else 0)


@memo_by_json(limit=20_000)  # clients resend the same definitions every turn
def render_tool(tool: Mapping[str, Any]) -> str:
    """Render one tool definition as OpenAI renders it into the prompt."""
    return _render_tool(tool)


def _render_tool(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function") if isinstance(tool.get("function"), _MAP) else tool
    assert isinstance(fn, _MAP)
    description = fn.get("description") or ""
    params = fn.get("parameters") or {}
    params_text = orjson.dumps(params, option=orjson.OPT_SORT_KEYS).decode() if params else "{}"
    return f"// {description}\ntype {fn.get('name', '')} = (_: {params_text}) => any;\n"


class TokenCounter:
    """A memoising counter for one encoding; thread-safe, shared by every request.

    The memo is keyed by ``(hash(text), len(text))``, not by the text: keeping every
    distinct tool result and document of a long-running gateway alive as dictionary keys
    would hold hundreds of megabytes, while an entry keyed by numbers costs ~150 bytes.
    A str caches its hash, so the look-up costs the same. Two different texts of one
    length colliding in a 64-bit hash (odds ~1e-10 with the cache full) would share a
    count, which is an acceptable error for a count and no risk to what is forwarded.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding
        self._enc = _encoding(encoding)
        self._cache: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._messages: ObjectMemo[int] = ObjectMemo()  # per message object, across requests (RequestCounter)
        # per tool definition and per tool list, across requests (RequestCounter): an unchanged tool
        # list is last turn's object from the parse on (``api.incremental_parse``), its tools too
        self._tools: ObjectMemo[int] = ObjectMemo()
        self._chunk_sums: HistoryFold[int] = HistoryFold()  # per history chunk (gateway.history_fold)

    def text(self, text: str) -> int:
        if not text:
            return 0
        key = (hash(text), len(text))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        n = len(self._enc.encode(text, disallowed_special=()))
        with self._lock:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = n
        return n

    def message(self, message: Mapping[str, Any]) -> int:
        get = message.get
        content = get("content")
        if content.__class__ is str and not get("tool_calls") and not get("name"):
            # The common shape (text content, no name, no calls), counted without building
            # the pieces list: the same sum as below, in a third of the time.
            call_id = get("tool_call_id")
            n = MESSAGE_OVERHEAD + self.text(str(get("role", ""))) + self.text(content)
            return n + self.text(str(call_id)) if call_id else n
        pieces, images = message_pieces(message)
        return message_overhead(message) + sum(self.text(p) for p in pieces) + images * IMAGE_TOKENS

    def messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        if messages.__class__ in (tuple, list) and len(messages) > CHUNK:  # type: ignore[arg-type,unused-ignore]
            return sum(self._chunk_sums.parts(messages, self._chunk_sum))  # type: ignore[arg-type,unused-ignore]
        return sum(self.message(m) for m in messages)

    def _chunk_sum(self, chunk: Chunk) -> int:
        return sum(self.message(m) for m in chunk.messages)

    def tool(self, tool: Mapping[str, Any]) -> int:
        return self.text(render_tool(tool))

    def tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        if not tools:
            return 0
        return TOOLS_OVERHEAD + sum(self.tool(t) for t in tools)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Prompt tokens of a whole request, as the provider will report ``prompt_tokens``."""
        return self.tools(tools) + self.messages(messages) + REPLY_PRIMING

    def missing(
        self, messages: Iterable[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> list[str]:
        """The texts of a request this counter has not counted yet, each once, in order."""
        seen = self._cache
        out: dict[str, None] = {}
        for message in messages:
            for piece in message_pieces(message)[0]:
                if piece and (hash(piece), len(piece)) not in seen:
                    out[piece] = None
        for tool in tools or ():
            rendered = render_tool(tool)
            if (hash(rendered), len(rendered)) not in seen:
                out[rendered] = None
        return list(out)

    def request_at_most(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """At most ``request(messages, tools)``, without encoding: what is counted already, and the UTF-8
        length of each text not counted yet (every token of a byte-level BPE stands for at least one byte).

        Whether a request is under a threshold is asked before the forward every turn, and an agent's
        newest round (a few thousand characters) costs ~0.2 ms to encode: a request under the threshold
        by more than its new text's bytes is answered without it, and counted after the answer."""
        return self._bound(messages, tools, _utf8_length)

    def request_at_least(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """At least ``request(messages, tools)``, without encoding: what is counted already, nothing for the rest."""
        return self._bound(messages, tools, _nothing)

    def _bound(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        unknown: Callable[[str], int],
    ) -> int:
        cache = self._cache

        def text(piece: str) -> int:
            if not piece:
                return 0
            found = cache.get((hash(piece), len(piece)))
            return found if found is not None else unknown(piece)

        def message(message: Mapping[str, Any]) -> int:
            found = self._messages.get(message)
            if found is not None:
                return found
            pieces, images = message_pieces(message)
            return message_overhead(message) + sum(map(text, pieces)) + images * IMAGE_TOKENS

        return self._tools_bound(tools, text) + self._messages_bound(messages, message) + REPLY_PRIMING

    def _messages_bound(
        self, messages: Sequence[Mapping[str, Any]], message: Callable[[Mapping[str, Any]], int]
    ) -> int:
        if messages.__class__ in (tuple, list) and len(messages) > CHUNK:
            return sum(
                sum(map(message, chunk.messages)) if part is None else part
                for chunk, part in self._chunk_sums.known(messages)
            )
        return sum(map(message, messages))

    def _tools_bound(self, tools: Sequence[Mapping[str, Any]] | None, text: Callable[[str], int]) -> int:
        if not tools:
            return 0
        known = self._tools.get(tools)
        if known is not None:
            return known
        return TOOLS_OVERHEAD + sum(
            found if (found := self._tools.get(tool)) is not None else text(render_tool(tool)) for tool in tools
        )

    def learn(self, texts: Iterable[str]) -> None:
        """Count ``texts`` into the cache (safe to run in a worker thread: tiktoken releases the GIL)."""
        for text in texts:
            self.text(text)

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def for_request(self) -> RequestCounter:
        """A counter for one request's assembly, sharing this one's text memo (see RequestCounter)."""
        return RequestCounter(self)


class RequestCounter(TokenCounter):
    """A TokenCounter for one request that also remembers each message and tool object it counted.

    The passes, the prefix tracker and the budget report each count the whole request,
    and the assembled request shares most message objects with the original, so one
    request counts the same message a dozen times. The text memo makes each count a few
    look-ups, but over 300 messages that is still ~1.5 ms a count. Keyed by ``id()`` of
    the (never mutated) parsed objects, a repeat count is one dict look-up. The objects
    are held in the memo, so an id cannot be reused while it lives: make one per request
    and let it go with the request.
    """

    def __init__(self, shared: TokenCounter) -> None:  # no super(): shares the state instead
        self.encoding_name = shared.encoding_name
        self._enc = shared._enc
        self._cache = shared._cache
        self._lock = shared._lock
        self._messages = shared._messages
        self._tools = shared._tools
        self._chunk_sums = shared._chunk_sums
        self._objects: ObjectMemo[int] = ObjectMemo(limit=1 << 62)  # per request: bounded by the request
        # per request, per message tuple: its tools and bound (several passes ask before anything is counted)
        self._most: ObjectMemo[tuple[Any, int]] = ObjectMemo(limit=1 << 62)
        self._least: ObjectMemo[tuple[Any, int]] = ObjectMemo(limit=1 << 62)

    def _remembered(self, obj: Any, count: Callable[[Any], int]) -> int:
        return self._objects.get_or(obj, count)

    def message(self, message: Mapping[str, Any]) -> int:
        """Remembered across requests: a resent message is last turn's object (``sessions.resent``)."""
        return self._messages.get_or(message, partial(TokenCounter.message, self))

    def tool(self, tool: Mapping[str, Any]) -> int:
        """Remembered across requests, as messages are: a tool definition is never changed once parsed."""
        found = self._tools.get(tool)
        return found if found is not None else self._tools.put(tool, TokenCounter.tool(self, tool))

    def tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Remembered across requests: a dozen counts a request (the passes, the budget report) of the
        same list, which is last turn's list when the client's tools did not change."""
        if not tools:
            return 0
        found = self._tools.get(tools)
        return found if found is not None else self._tools.put(tools, TokenCounter.tools(self, tools))

    def messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Whole message lists are recounted by several passes; a tuple (a Context's) is remembered."""
        if messages.__class__ is not tuple:
            return TokenCounter.messages(self, messages)
        return self._remembered(messages, partial(TokenCounter.messages, self))

    def request_at_most(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        return self._remembered_bound(self._most, messages, tools, _utf8_length)

    def request_at_least(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        return self._remembered_bound(self._least, messages, tools, _nothing)

    def _remembered_bound(
        self,
        memo: ObjectMemo[tuple[Any, int]],
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        unknown: Callable[[str], int],
    ) -> int:
        if messages.__class__ is not tuple:
            return self._bound(messages, tools, unknown)
        found = memo.get(messages)
        if found is not None and found[0] is tools:
            return found[1]
        return memo.put(messages, (tools, self._bound(messages, tools, unknown)))[1]

    def _messages_bound(
        self, messages: Sequence[Mapping[str, Any]], message: Callable[[Mapping[str, Any]], int]
    ) -> int:
        known = self._objects.get(messages) if messages.__class__ is tuple else None
        return known if known is not None else TokenCounter._messages_bound(self, messages, message)

    def for_request(self) -> RequestCounter:
        return self


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _nothing(text: str) -> int:
    return 0


#: Process-wide: one counter per encoding, whose memos hold counts in that encoding only.
_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def counter_for(encoding: str) -> TokenCounter:
    """Return the process-wide counter for an encoding, so every request shares one cache."""
    found = _COUNTERS.get(encoding)
    if found is None:
        with _COUNTERS_LOCK:
            found = _COUNTERS.setdefault(encoding, TokenCounter(encoding))
    return found
