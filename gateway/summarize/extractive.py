"""Summarise by keeping the sentences that carry facts: deterministic, no model, no I/O.

Every message is cut into sentences; a sentence earns its place by the facts it
carries (numbers, dates in figures or in words, identifiers, URLs, paths, names and places)
and by what it settles: a decision ("decided", "agreed", "booked", "due"), a plan ("going
to", "next week") or a preference ("I prefer", "my favourite", "allergic"), weighted by who said it: the user's
statements and tool results outrank an assistant restating them, and ids that only
label a templated reply ("Simulated answer 3fa2b1c9 to: ...") count for nothing
(``salience``). Filler and small talk are dropped: greetings, thanks, reactions ("Congrats -
you must be so stoked!", "Must have been such an adrenaline rush!") and the assistant's own
questions state nothing, and a name in a greeting ("Hey John!") does not make it a fact
(measured against truncation to the same tokens in benchmarks/RESULTS.md, session 34).
When the kept sentences exceed the budget, the ones
adding the most facts not yet covered win, so a fact restated in later chunks or
replies is kept once, in the words of whoever said it first with most weight; the
survivors are printed in their original order, each a whole sentence (or clause) so
the fact keeps the words that say what it is. The previous summary's lines compete on
the same terms, so re-compaction is hierarchical and stays inside the budget. A fact the rounds
that compaction keeps after the span still say word for word is covered already (``kept``): the
request carries it, and the summary's room goes to facts nothing else in it carries.

The same input always gives the same bytes: checkpoints depend on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.summarize.facts import extract_facts, prose_dates
from gateway.summarize.salience import (
    fact_weight,
    is_template,
    speaker_kind,
    template_heads,
    template_ids,
    weight,
)
from gateway.summarize.transcript import transcript_lines
from gateway.tokens import TokenCounter

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NAME = re.compile(r"(?<=[a-z,;:] )(?!I\b|I['’])[A-Z][\w'’-]+(?: [A-Z][\w'’-]+)*")
_DECISION = re.compile(
    r"\b(decid\w*|agree[ds]?|agreed to|confirm\w*|chose|choose|approv\w*|reject\w*|cancel\w*|need to|have to|"
    r"must (?!have been|be so|be really|be such)\w+|todo|to-do|deadline|due|plan\w*|going to|gonna|will (?!be so)\w+|"
    r"booked|sign(?:ed)? up|remember to|prefer\w*|favou?rite|allerg\w*|always|never|"
    r"love to|loves?|hates?|can't stand|next (?:week|month|year|weekend|time)|tomorrow)\b",
    re.IGNORECASE,
)
#: Openings of a sentence that only greets, thanks or reacts; with no figure in it, it states nothing.
_SMALL_TALK = re.compile(
    r"^[\W_]*(hi|hey|hello|hiya|yo|thanks|thank you|thx|congrat\w*|wow|whoa|aw+|oh|ooh|ha(ha)+|lol|yay|"
    r"great|awesome|amazing|nice|cool|lovely|wonderful|fantastic|perfect|ok(ay)?|sure|"
    r"good (morning|night|luck|for you)|"
    r"sounds (great|good|like|amazing|fun|lovely|wonderful)|that('s| is| was| sounds) (great|awesome|amazing|wonderful|"
    r"so|really|such|fantastic|lovely|fun|exciting|incredible|impressive)|must (have been|be)|you must|"
    r"so (glad|happy|cool|exciting)|i'?m (so )?(glad|happy|sorry|excited for)|what a|how (are|was|exciting|fun|"
    r"lovely|cool|nice|wonderful)|take care|see you|bye|glad|happy to hear|no problem|you're welcome|absolutely|"
    r"of course|totally|i (can|could) imagine|i bet|good to hear|enjoy|have fun)\b",
    re.IGNORECASE,
)
_EXCLAIM_ONLY_CHARS = 90
MAX_UNIT_CHARS = 320
MIN_SPLIT_CHARS = 80  # sentences longer than this are cut into clauses
#: A tool's record or a call's arguments are cut only past this: a short record keeps its fields together.
MIN_SPLIT_RECORD_CHARS = 160
MIN_PIECE_CHARS = 30
_CLAUSE_END = re.compile(r"(?<=[,;])\s+|\s*[—–]\s*|\s+-\s+(?=[A-Za-z][a-z])")
_HEDGE = re.compile(
    r"(?<![\w'’-])(?:really|just|honestly|basically|actually|literally|definitely|totally|pretty much|kind of|"
    r"sort of|a little|a bit|or something|I guess|I think|I mean|you know)(?![\w'’-]),?\s*"
)
_OPENING = re.compile(
    r"^(?:(?:and|but|so|plus|or|though|also|then|oh|well|yeah|yes|honestly|actually|basically|anyway)\b[\s,!.]*)+",
    re.IGNORECASE,
)
_RECORDS = ("tool", "called")
#: Between the pieces of one message that share a summary line.
PIECE_SEP = "; "
#: Prefix of the line listing facts a summary could not fit in sentences (see summarize_range).
ALSO_MENTIONED = "- also mentioned: "
_ELLIPSIS = " …"
_SUMMARY_LINE = re.compile(r"^- ([a-z][\w -]*?): (.*)$")
#: Share of the budget reserved for a line of the names the chosen sentences leave out, at most what that line
#: needs: the room it does not need goes back to the sentences (before session 38 it was lost, up to the whole
#: share, and a reserved half or quarter cost rhelm's held-out chats answers; RESULTS, session 35, issue 40).
#: Names are two or three tokens each; a sentence that carries one costs fifteen (bfcl_memory, session 38).
NAMES_SHARE = 0.35
#: Fewer names than this get no reserved room, only what the sentences leave (a locker log names nobody).
MIN_NAMES = 5
#: An item of a previous "also mentioned" line that is itself a name ("Legend Investments", "SOAR").
_NAME_TAIL = re.compile(r"(?:['’]s?| I['’]\w+| I)$")
_DIGIT = re.compile(r"\d")
#: An aside in parentheses in what a person said ("(normal is under 35 U/L)", "(bad cholesterol)"): a reference
#: range or a gloss, rarely what is asked back, and its figures outranked the clause's own (RESULTS, session 38).
_ASIDE = re.compile(r"\s*\([^()]{3,80}\)")
#: A small count and what it counts ("7 crushed corners", "three times", "3x this week"): too short to be
#: a fact that must survive (``facts._keep``), still what a later question asks back.
_COUNT = re.compile(
    r"(?<![\w.,/-])(\d|one|two|three|four|five|six|seven|eight|nine|ten|twice)x?(?![\w.,/:-])\s+(?:\w+\s+)?([a-z]{3,})",
    re.IGNORECASE,
)
_LOWER_WORD = re.compile(r"\b[a-z][\w'’-]*")
_BARE_NAME = re.compile(r"^[A-Z][\w'’&.-]*(?: [A-Z][\w'’&.-]*)*$")


def says(text: str, fact: str) -> bool:
    """Whether ``text`` states ``fact`` as a whole word ("10" is not in "100" or "2010")."""
    return bool(text) and fact in text and re.search(rf"(?<![\w.]){re.escape(fact)}(?![\w]|\.\d)", text) is not None


def _decision_bonus(decision: bool, facts: frozenset[str]) -> int:
    """A decision, plan or preference counts fully with a fact in it ("booked TP174 for May 3"), a
    little without one: chat is full of "I'd love to" and "I always", which settle nothing."""
    return 0 if not decision else (3 if facts else 1)


@dataclass(frozen=True, slots=True)
class _Unit:
    index: int
    text: str
    facts: frozenset[str]
    decision: bool
    weight: int
    #: The message (or previous summary line) the unit was cut from: pieces of one share a summary line. None for a
    #: tool's record or a call, whose pieces stay on lines of their own: joined, a record's further rows (bare
    #: flight ids) came cheap and filled the room its sentences needed (tests/assembly/test_compact_history.py).
    line: int | None = None
    head: str = ""  # the line's opening ("- user: "), printed once for the pieces of one line

    @property
    def body(self) -> str:
        return self.text[len(self.head) :]

    @property
    def score(self) -> int:
        return self.weight * (2 * sum(map(fact_weight, self.facts)) + _decision_bonus(self.decision, self.facts))


def _pieces(sentence: str, split_at: int = MIN_SPLIT_CHARS, record: bool = False) -> list[str]:
    """Split a long sentence (a JSON tool result, a list, a chatty sentence) into clauses.

    Cut at commas, semicolons and dashes; short parts are merged with the next one, so a piece
    is a clause ("arrives on 2026-03-19", ``"flight": "TP174"``, "my LDL was 130 mg/dL")
    rather than a single word, and a fact pays only for the words around it.
    """
    if len(sentence) <= split_at:
        return [_trim_opening(sentence, record)]
    out: list[str] = []
    current = ""
    for part in _CLAUSE_END.split(sentence):
        if not part or not part.strip():
            continue
        current = f"{current} {part}" if current else part
        if len(current) >= MIN_PIECE_CHARS:
            out.append(_trim_opening(current, record)[:MAX_UNIT_CHARS])
            current = ""
    if current:
        if out and len(current) < MIN_PIECE_CHARS and len(out[-1]) + len(current) < MAX_UNIT_CHARS:
            out[-1] = f"{out[-1]} {current}"
        else:
            out.append(_trim_opening(current, record)[:MAX_UNIT_CHARS])
    return [o for o in out if o]


def _trim_opening(piece: str, record: bool = False) -> str:
    """A clause without the connective or interjection it opens with ("and", "but", "Oh!"), the hedges
    in it ("really", "honestly", "a bit"), its asides in parentheses and the comma it ends on: words a
    fact does not need. A tool's record or a call (``record``) keeps its parentheses: they are data."""
    bare = _HEDGE.sub("", _OPENING.sub("", piece.strip())).strip().rstrip(",;")
    if not record:
        bare = _ASIDE.sub("", bare).strip() or bare
    return bare or piece.strip()


def is_small_talk(body: str, speaker: str, stated: bool | None = None) -> bool:
    """A greeting, thanks, a reaction or the assistant's own question: nothing a later turn needs.

    A sentence with a figure (a number, an id, a date) is never small talk; names do not save
    one ("Hey John!", "Congrats, Maria!"). ``stated``: whether it has one, when the caller knows."""
    if stated if stated is not None else (extract_facts(body) or prose_dates(body)):
        return False
    stripped = body.strip()
    if _SMALL_TALK.search(stripped):
        return True
    if speaker_kind(speaker) == "assistant" and stripped.endswith("?"):
        return True
    return stripped.endswith("!") and len(stripped) <= _EXCLAIM_ONLY_CHARS and not _DECISION.search(stripped)


def _unit(
    index: int, text: str, body: str, speaker: str, noise: frozenset[str], line: int | None = None, head: str = ""
) -> _Unit:
    """A candidate line: ``text`` is printed, ``body`` (without the speaker) is scored."""
    found, dates = extract_facts(body), prose_dates(body)  # once: the facts scan is most of the summary's cost
    if is_small_talk(body, speaker, bool(found or dates)):
        return _Unit(index, text, frozenset(), False, weight(speaker), line=line, head=head)
    names = _NAME.findall(body)
    counts = [f"{m[1].lower()} {m[2].lower()}" for m in _COUNT.finditer(body)]
    facts = frozenset(extract_facts("", extra=[*found, *names, *dates, *counts])) - noise
    decided = bool(_DECISION.search(body)) and not body.rstrip().endswith("?")  # asking is not deciding
    return _Unit(index, text, facts, decided, weight(speaker), line, head)


def _previous_lines(previous: str | None) -> list[tuple[str, str, str, int | None, str]]:
    """``(printed text, speaker, scored body, line, head)`` per piece of the previous summary: a line
    of pieces joined by ``PIECE_SEP`` comes apart into its pieces again, each competing on its own."""
    out: list[tuple[str, str, str, int | None, str]] = []
    for number, line in enumerate((previous or "").splitlines()):
        line = line.strip()
        if line.startswith(ALSO_MENTIONED):  # one unit per fact, so the list competes item by item
            out.extend(
                (ALSO_MENTIONED + item, "summary", item, None, "") for item in line[len(ALSO_MENTIONED) :].split(", ")
            )
        elif line:
            match = _SUMMARY_LINE.match(line)
            if match is None:
                out.append((line, "summary", line, None, ""))
                continue
            head = line[: len(line) - len(match[2])]
            out.extend((head + piece, match[1], piece, -1 - number, head) for piece in match[2].split(PIECE_SEP))
    return out


def _units(messages: Sequence[Mapping[str, Any]], previous: str | None) -> list[_Unit]:
    earlier = _previous_lines(previous)
    lines = transcript_lines(messages)
    said = [*((speaker, body) for _, speaker, body, _, _ in earlier), *lines]
    noise, heads = template_ids(said), template_heads(said)
    units = [
        _unit(i, text, body, speaker, noise, line, head)
        for i, (text, speaker, body, line, head) in enumerate(e for e in earlier if not is_template(e[1], e[2], heads))
    ]
    for number, (speaker, text) in enumerate(lines):
        is_call = speaker.endswith(" called")
        sentences = [text] if is_call else [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
        head = f"- {speaker}: "
        record = speaker_kind(speaker) in _RECORDS
        split_at, line = (MIN_SPLIT_RECORD_CHARS, None) if record else (MIN_SPLIT_CHARS, number)
        for sentence in sentences:
            if is_template(speaker, sentence, heads):
                continue  # a reply labelled with an id, in the words of a template: nothing of its own
            for piece in _pieces(sentence, split_at, record):
                units.append(_unit(len(units), head + piece, piece, speaker, noise, line, head))
    return units


def _owned(units: list[_Unit]) -> list[_Unit]:
    """Units without the facts a heavier speaker also stated: a reply restating the user's or a
    tool's figure adds nothing, so the fact is kept in the words of whoever stated it."""
    best: dict[str, int] = {}
    for u in units:
        for f in u.facts:
            best[f] = max(best.get(f, 0), u.weight)
    out = []
    for u in units:
        lighter = frozenset(f for f in u.facts if best[f] > u.weight)
        out.append(replace(u, facts=u.facts - lighter) if lighter else u)
    return out


def _select(units: list[_Unit], budget: int, counter: TokenCounter, known: frozenset[str] = frozenset()) -> list[_Unit]:
    """Pick the units whose facts weigh most (the shorter first among equals), skipping those adding
    no uncovered fact, until the budget is spent; a clause of a message already on a line pays only
    for its words and the separator.

    Dividing by length was tried (benchmarks/RESULTS.md, sessions 34 and 37): short bare ids (an agent's
    flight rows, a previous "also mentioned" line) then beat the records that say what their id is
    about, and on bfcl_memory clauses ranked by weight carried as many answers, so it is a tie-break only."""
    covered: set[str] = set(known)
    seen_text: set[str] = set()
    opened: set[int] = set()
    chosen: list[_Unit] = []
    spent = 0
    owned = [u for u in _owned(units) if u.score > 0]
    alone = {u.index: counter.text(u.text) + 1 for u in owned}
    for unit in sorted(owned, key=lambda u: (-u.score, alone[u.index], u.index)):
        joins = unit.line is not None and unit.line in opened
        cost = counter.text(PIECE_SEP + unit.body) if joins else alone[unit.index]
        if unit.text in seen_text or spent + cost > budget:
            continue
        if not (unit.facts - covered) and not unit.decision:
            continue
        chosen.append(unit)
        seen_text.add(unit.text)
        covered |= unit.facts
        spent += cost
        if unit.line is not None:
            opened.add(unit.line)
    chosen.sort(key=lambda u: u.index)
    while chosen and counter.text(_render(chosen)) > budget:  # token counts do not add up exactly
        chosen.remove(min(chosen, key=lambda u: (u.score, -u.index)))
    return chosen


def _render(units: list[_Unit]) -> str:
    """One line per transcript line, its pieces joined by ``PIECE_SEP``; the "also mentioned" facts
    share one last line (a line each paid its opening again, up to three times a summary)."""
    lines: list[str] = []
    also: list[str] = []
    last: _Unit | None = None
    for unit in units:
        if unit.text.startswith(ALSO_MENTIONED):
            also.append(unit.text[len(ALSO_MENTIONED) :])
            continue
        if last is not None and unit.line is not None and unit.line == last.line:
            lines[-1] += PIECE_SEP + unit.body
        else:
            lines.append(unit.text)
        last = unit
    return "\n".join([*lines, ALSO_MENTIONED + ", ".join(also)] if also else lines)


def with_also(summary: str, items: Sequence[str]) -> str:
    """``summary`` with ``items`` added to its "also mentioned" line (its last line), or on a new one."""
    if not items:
        return summary
    if summary.rsplit("\n", 1)[-1].startswith(ALSO_MENTIONED):
        return f"{summary}, {', '.join(items)}"
    line = ALSO_MENTIONED + ", ".join(items)
    return f"{summary}\n{line}" if summary else line


def _names(messages: Sequence[Mapping[str, Any]], previous: str | None) -> list[str]:
    """The names the user or a tool stated (a firm, a product, a place, a person), heaviest speaker first,
    then first said first, taking turns with a previous summary's "also mentioned" names (``_alternate``).
    An assistant's are left out: in rhelm's chats they were its headings and filled the line (session 38).

    Names are what a later question most often asks back ("the firm I manage", "the platform we
    built") and what a sentence budget drops first: a long sentence carries one or two, a name
    costs two or three tokens (benchmarks/RESULTS.md, session 35)."""
    earlier: list[str] = []
    found: dict[str, int] = {}
    said = [(speaker, text) for speaker, text in transcript_lines(messages) if speaker_kind(speaker) != "called"]
    heads = template_heads(said)  # "Simulated answer 3fa2 to: Long day": a template's words name nobody
    lines = [(speaker, text) for speaker, text in said if not is_template(speaker, text, heads)]
    common = {w.lower() for _, text in said for w in _LOWER_WORD.findall(text)}
    for text, _, body, _, _ in _previous_lines(previous):
        if text.startswith(ALSO_MENTIONED) and _BARE_NAME.match(body) and body not in earlier:
            earlier.append(body)
    for speaker, text in lines:
        if speaker_kind(speaker) == "assistant" or is_small_talk(text, speaker):
            continue  # an assistant's capitalised words are mostly its headings ("Quick Mapping", "Next Steps")
        for raw in _NAME.findall(text):
            name = _NAME_TAIL.sub("", raw)
            if not name or _DIGIT.search(name) or (" " not in name and name.lower() in common):
                continue  # an id is a fact already; "Submit", "Team" are words written lowercase elsewhere
            if name not in earlier:
                found[name] = max(found.get(name, 0), weight(speaker))
    order = {name: i for i, name in enumerate(found)}
    return _alternate(earlier, sorted(found, key=lambda n: (-found[n], order[n])))


def _alternate(earlier: Sequence[str], new: Sequence[str]) -> list[str]:
    """The previous line's names and the span's new ones, taking turns (each in its own order).

    A summary is refolded at every compaction and chunk, so when the earlier names came first the line
    filled with the conversation's first names and a later one never got in (bfcl_memory student:
    "Archie", "Carla", "Saturday", from its second half, asked back and left out). Taking turns, each
    fold's new names get every other place and the earlier ones keep the rest in their order
    (RESULTS, session 40, issue 40)."""
    out: list[str] = []
    for i in range(max(len(earlier), len(new))):
        out += [*earlier[i : i + 1], *new[i : i + 1]]
    return out


def _with_names(summary: str, names: Sequence[str], budget: int, counter: TokenCounter) -> str:
    """``summary`` and one "also mentioned" line of the ``names`` it lacks, as many as ``budget`` allows."""
    room = budget - counter.text(summary) - 1 - counter.text(ALSO_MENTIONED)
    if summary.rsplit("\n", 1)[-1].startswith(ALSO_MENTIONED):
        room += 1 + counter.text(ALSO_MENTIONED) - counter.text(", ")  # joins the line there is
    kept: list[str] = []
    for name in names:
        if name in summary or any(name in k for k in kept):
            continue
        room -= counter.text(name + ", ")
        if room < 0:
            break
        kept.append(name)
    return with_also(summary, kept)


class ExtractiveSummarizer:
    """The deterministic summariser: always available, used when no model is set or the model fails."""

    name = "extractive"

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter

    def __call__(
        self, messages: tuple[Mapping[str, Any], ...], previous: str | None, max_tokens: int, kept: str = ""
    ) -> str:
        """``kept``: the text of the messages the compacted request keeps after the span (its newest
        rounds); a fact they still say word for word is covered already, so the summary's room goes to
        facts nothing else in the request carries."""
        units = _units(messages, previous)
        names = [n for n in _names(messages, previous) if not says(kept, n)]
        known = frozenset(f for u in units for f in u.facts if says(kept, f))
        room = min(int(max_tokens * NAMES_SHARE), self._line(names)) if len(names) >= MIN_NAMES else 0
        chosen = _select(units, max_tokens - room, self._counter, known)
        if room:  # the names the chosen sentences already say need no room: give it back to sentences
            summary = _render(chosen)
            need = min(room, self._line([n for n in names if n not in summary]))
            if need < room:
                chosen = _select(units, max_tokens - need, self._counter, known)
        if not chosen and units and not names:  # nothing fact-bearing: keep the span's opening, not lose it silently
            first = units[0].text
            return first[: max(16, max_tokens * 3)] + (_ELLIPSIS if len(first) > max_tokens * 3 else "")
        return _with_names(_render(chosen), names, max_tokens, self._counter)

    def _line(self, names: Sequence[str]) -> int:
        """What an "also mentioned" line of every one of ``names`` costs (0 for none)."""
        return self._counter.text(ALSO_MENTIONED + ", ".join(names)) + 1 if names else 0

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(encoding={self._counter.encoding_name!r})"
