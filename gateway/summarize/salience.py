"""Tell the facts people stated from the ids that only label a reply.

A summary has room for a few dozen facts, so it must know which ones matter. Three
signals, all read from the transcript alone:

- **Who said it.** The user's statements and what tools returned are the source of a
  fact; an assistant reply mostly restates them. ``SPEAKER_WEIGHT`` ranks the speakers,
  and a fact already carried by a heavier speaker's line adds nothing when restated.
- **What kind of fact.** An identifier that mixes letters and digits, a date, a path, a
  URL or an email is what a conversation cannot rebuild ("KV-4821D"); a bare count or a
  name is often incidental ("138 pallets"). ``fact_weight`` counts the first kind triple.
- **Template ids.** A reply that opens the same way every turn with only an id changed
  ("Simulated answer 3fa2b1c9 to: ...", "Request req-0042 done: ...") carries an
  incidental id. When at least ``MIN_TEMPLATE_REPEATS`` assistant lines share their
  first ``HEAD_WORDS`` words once facts are masked, and those heads differ only by one
  fact each, such a sentence is dropped and the facts in those heads are noise: not
  scored, not required of a summary, not listed as dropped, not sent to a summariser
  model. Users and tools are never judged this way (a user listing forty orders in one
  phrasing is stating forty facts), and an id a user or tool also gave stays a fact.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from gateway.summarize.facts import extract_facts, extract_facts_of

#: How much one fact counts by who said it; unknown speakers (a model's summary line) sit in between.
SPEAKER_WEIGHT: dict[str, int] = {"user": 3, "tool": 2, "called": 2, "assistant": 1}
DEFAULT_WEIGHT = 2
HEAD_WORDS = 4
MIN_TEMPLATE_REPEATS = 3
_MASK = re.compile(r"\S*\d\S*")  # any word with a digit: ids, hex digests, numbers
_STRONG = re.compile(r"[A-Za-z].*\d|\d.*[A-Za-z]|[/@:]|\d{4}-\d{2}-\d{2}")
STRONG_FACT_WEIGHT = 3


def fact_weight(fact: str) -> int:
    """How much a fact token counts: identifiers, dates, paths, URLs and emails triple, counts and names once."""
    return STRONG_FACT_WEIGHT if _STRONG.search(fact) else 1


def speaker_kind(speaker: str) -> str:
    """``user``, ``assistant``, ``tool`` or ``called`` for a transcript speaker ("tool search", "assistant called")."""
    if speaker.endswith(" called"):
        return "called"
    return speaker.split(" ", 1)[0]


def weight(speaker: str) -> int:
    return SPEAKER_WEIGHT.get(speaker_kind(speaker), DEFAULT_WEIGHT)


def _head(text: str) -> str:
    return " ".join(text.split()[:HEAD_WORDS])


def template_heads(lines: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The masked openings ("Simulated answer # to:") that assistant lines repeat with only an id changed."""
    heads: dict[str, set[str]] = defaultdict(set)
    for speaker, text in lines:
        if speaker_kind(speaker) != "assistant":
            continue
        head = _head(text)
        masked, slots = _MASK.subn("#", head)
        if slots == 1:
            heads[masked].add(head)
    return frozenset(masked for masked, variants in heads.items() if len(variants) >= MIN_TEMPLATE_REPEATS)


def is_template(speaker: str, text: str, heads: frozenset[str]) -> bool:
    """Whether ``text`` is an assistant sentence opening with one of ``heads`` (drop it: it only labels a reply)."""
    return bool(heads) and speaker_kind(speaker) == "assistant" and _MASK.sub("#", _head(text)) in heads


def template_ids(lines: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The incidental ids in assistant lines that repeat one opening with only an id changed."""
    heads = template_heads(lines)
    noise: set[str] = set()
    for speaker, text in lines:
        if is_template(speaker, text, heads):
            noise.update(extract_facts(_head(text)))
    if noise:  # an id a user or a tool also gave is theirs, not the template's
        stated = "\n".join(text for speaker, text in lines if speaker_kind(speaker) != "assistant")
        noise = {n for n in noise if n not in stated}
    return frozenset(noise)


def salient_facts(lines: Sequence[tuple[str, str]], *, extra: Iterable[str] = ()) -> list[str]:
    """The facts of ``lines`` a summary must keep: every fact except template ids, first seen first."""
    noise = template_ids(lines)
    found = extract_facts_of([text for _, text in lines], extra=extra)
    return [f for f in found if f not in noise]
