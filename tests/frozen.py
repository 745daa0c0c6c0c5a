"""Deep-frozen request bodies: a pass that mutates a message it was given fails loudly.

The gateway reuses parsed message objects across requests (``sessions.resent``, the token and
stub memos key on their identity), so a mutation would corrupt later turns silently. These
subclasses behave as dicts and lists for every read (and for orjson), and raise on every write.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn


class MutationError(TypeError):
    """A pass wrote into an object the client sent."""


def _refuse(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise MutationError(f"an assembly pass mutated a {type(self).__name__} the client sent")


class FrozenDict(dict[str, Any]):
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


class FrozenList(list[Any]):
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]


def freeze(value: Any) -> Any:
    """``value`` with every dict and list inside it frozen (tuples become frozen lists' tuples)."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    return value
