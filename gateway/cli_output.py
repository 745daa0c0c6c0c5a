"""Print what the store holds without letting it drive the terminal.

Session ids, model names, message content and provider errors are data that anyone with a
gateway key wrote. Printed raw through rich they could crash the CLI (``evil[/]`` is rich
markup: ``MarkupError``) or reach the terminal as escape sequences (``\\x1b]0;title\\x07``,
cursor moves, a cleared screen). ``plain`` makes a value a rich ``Text`` (never parsed as
markup) and ``SafeConsole`` drops control characters from everything it writes except the
styles rich itself renders, so no data path can emit one.

>>> plain("evil[/]").plain
'evil[/]'
>>> printable("ok\\x1b[2Jdone\\x07")
'ok?[2Jdone?'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

#: C0 and C1 controls but newline and tab, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each control character (newline and tab excepted) shown as ``?``."""
    return _CONTROL.sub("?", text)


def plain(value: object) -> Text:
    """A table cell or line holding ``value`` verbatim: no markup, no control characters."""
    return Text(printable(str(value)))


class SafeConsole(Console):
    """A rich Console whose written text carries no control character it did not put there itself."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        clean = (seg if seg.control else Segment(printable(seg.text), seg.style) for seg in buffer)
        return super()._render_buffer(clean)
