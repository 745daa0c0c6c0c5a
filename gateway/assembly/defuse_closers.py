"""Keep text inside a gateway block from closing it or opening one: escape every gateway tag in it.

The gateway wraps material it did not write (summaries, transcripts, recalled passages,
facts, reminders) in tags the model is told to read as data. Text that contains a closer
(``</summary>``) could end the block early and have what follows read as the gateway's own
words; text that contains an opener (``<passage turns="1-4" score="1.00">``) could pose as a
block the gateway wrote, such as a recalled passage of high score, inside a summary. Models
read tags case- and space-insensitively, and read look-alikes as the tag too (fullwidth
``＜／ｓｕｍｍａｒｙ＞``, a zero-width space or joiner inside the name), so the match covers all
of them: a backslash goes in after the opening bracket, ``</summary`` -> ``<\\/summary``,
``<passage turns=`` -> ``<\\passage turns=``, ``＜／ｓｕｍｍａｒｙ`` -> ``＜\\／ｓｕｍｍａｒｙ``. Every gateway
tag is defused in every block, so a tag of one block cannot pose as the edge of another either.
An opener counts only as a tag: its name followed by a space, ``>`` or ``/`` (``<summary-like>``
is left alone).

>>> defuse_closers("a </SUMMARY> b </ memory> c </div>")
'a <\\\\/SUMMARY> b <\\\\/ memory> c </div>'
>>> defuse_closers('<passage turns="1-2" score="1.00">x')
'<\\\\passage turns="1-2" score="1.00">x'
"""

from __future__ import annotations

import re

#: Every tag the gateway wraps content in.
GATEWAY_TAGS = ("summary", "transcript", "recalled", "passage", "memory", "documents", "document", "reminder", "data")

#: Characters a model may read as ``<`` and ``/``: ASCII, fullwidth, small form, and look-alike slashes.
_LT = "<\uff1c\ufe64"
_SLASH = "/\uff0f\u2044\u2215\u29f8"
#: Characters that show nothing and may sit inside a tag a model still reads (zero-width space,
#: joiners, word joiner, BOM, soft hyphen, Mongolian vowel separator).
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"
_GAP = f"[\\s{_INVISIBLE}]*"
_HIDDEN = f"[{_INVISIBLE}]*"


def _letter(c: str) -> str:
    """``c`` or its fullwidth form (case-insensitively, with the pattern's flag)."""
    return f"[{c}{chr(ord(c) - 0x61 + 0xFF41)}]"


def _name(tag: str) -> str:
    return _HIDDEN.join(_letter(c) for c in tag)


_NAMES = "|".join(_name(tag) for tag in sorted(GATEWAY_TAGS, key=len, reverse=True))
#: A closer (``</x``, any spacing) or an opener followed by a space, ``>`` or ``/``; group 1 is
#: the bracket, group 2 the rest of the tag's start.
_TAG = re.compile(
    f"([{_LT}])({_GAP}[{_SLASH}]{_GAP}(?:{_NAMES})(?![a-z0-9_])|{_HIDDEN}(?:{_NAMES})(?=[\\s{_INVISIBLE}>\uff1e/\uff0f]))",
    re.IGNORECASE,
)
_BRACKETS = frozenset(_LT)


def defuse_closers(text: str) -> str:
    """``text`` with each gateway tag, closer or opener, escaped (``</x`` -> ``<\\/x``, ``<x `` -> ``<\\x ``);
    unchanged (the same object) when it has none."""
    if not any(b in text for b in _BRACKETS):
        return text
    return _TAG.sub(r"\1\\\2", text)
