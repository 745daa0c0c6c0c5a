"""Keep text inside a gateway block from closing it: escape every gateway block's closing tag.

The gateway wraps material it did not write (summaries, transcripts, recalled passages,
facts, reminders) in tags the model is told to read as data. Text that contains a closer
(``</summary>``) could end the block early and have what follows read as the gateway's own
words. Models read tags case- and space-insensitively, so the match is too: ``</SUMMARY>``,
``</ Recalled>`` and ``</summary`` all become ``<\\/...``. Every gateway tag is defused in
every block, so a closer of one block cannot pose as the end of another either.

>>> defuse_closers("a </SUMMARY> b </ memory> c </div>")
'a <\\\\/SUMMARY> b <\\\\/ memory> c </div>'
"""

from __future__ import annotations

import re

#: Every tag the gateway wraps content in.
GATEWAY_TAGS = ("summary", "transcript", "recalled", "passage", "memory", "documents", "document", "reminder", "data")
_CLOSER = re.compile(r"<(\s*/\s*(?:" + "|".join(GATEWAY_TAGS) + r")\b)", re.IGNORECASE)


def defuse_closers(text: str) -> str:
    """``text`` with each gateway closing tag escaped (``</x`` -> ``<\\/x``); unchanged when it has none."""
    if "<" not in text:
        return text
    return _CLOSER.sub(r"<\\\1", text)
