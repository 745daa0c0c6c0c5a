"""The sessions list's form (filters, sort, page) and the session page's compact per-turn chart.

The list's state lives in its URL query, so a filtered, sorted page can be linked and
reloaded; ``SessionsForm`` reads it once, tolerating nonsense (an unknown sort or a
negative page falls back to the default) because it comes from a browser's address bar.
The chart draws one column per turn in a fixed-width SVG, so a 500-turn session fits one
screen, with compactions and tool-set changes marked on the turn they took effect.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from gateway.ui.queries import PAGE_SIZE, SORTS, SessionFilter, TurnRow

#: The time ranges the list offers, label -> seconds back from now (None: all time).
RANGES: Mapping[str, int | None] = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "all": None}
PER_PAGE_MAX = 500
CHART_WIDTH = 1000
CHART_HEIGHT = 120


_FIELDS = {"per": "per_page", "from": "start", "to": "end"}  # URL keys named otherwise in the form
_DAY = "%Y-%m-%d"
_MINUTE = "%Y-%m-%dT%H:%M"


def moment(text: str, *, last: bool = False) -> float | None:
    """A custom range's bound in unix seconds (UTC); None when ``text`` is not a day or a minute.

    ``last``: the bound closes the range, so it covers its whole day or minute.

    >>> moment("2026-12-03"), moment("2026-12-03", last=True), moment("2026-12-03T14:00"), moment("soon")
    (1796256000.0, 1796342399.999, 1796306400.0, None)
    """
    for fmt, span in ((_DAY, 86_400), (_MINUTE, 60)):
        try:
            start = calendar.timegm(time.strptime(text, fmt))
        except ValueError:
            continue
        return float(start + span) - 0.001 if last else float(start)
    return None


@dataclass(frozen=True, slots=True)
class SessionsForm:
    q: str = ""
    model: str = ""
    caller: str = ""
    user: str = ""  # the client's ``user``
    tag: str = ""  # one of its metadata tags, "key=value"
    status: str = ""
    range: str = "all"
    start: str = ""  # a custom range's first day or minute (UTC, "2026-12-03" or "2026-12-03T14:00"); wins over range
    end: str = ""  # its last day (inclusive) or minute
    sort: str = "last"
    dir: str = "desc"
    page: int = 1
    per_page: int = PAGE_SIZE

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> SessionsForm:
        def number(key: str, default: int, top: int) -> int:
            """A positive whole number up to ``top``; anything else (0, -5, "x") is the default."""
            try:
                value = int(query.get(key, default))
            except ValueError:
                return default
            return min(value, top) if value >= 1 else default

        return cls(
            q=query.get("q", "").strip(),
            model=query.get("model", ""),
            caller=query.get("caller", ""),
            user=query.get("user", "").strip(),
            tag=query.get("tag", "").strip(),
            status=query.get("status", "") if query.get("status") in ("errors", "ok") else "",
            range=query.get("range", "all") if query.get("range") in RANGES else "all",
            start=query.get("from", "") if moment(query.get("from", "")) is not None else "",
            end=query.get("to", "") if moment(query.get("to", "")) is not None else "",
            sort=query.get("sort", "last") if query.get("sort") in (*SORTS, "cost") else "last",
            dir="asc" if query.get("dir") == "asc" else "desc",
            page=number("page", 1, 1_000_000),
            per_page=number("per", PAGE_SIZE, PER_PAGE_MAX),
        )

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def filters(self, now: float) -> SessionFilter:
        back = RANGES[self.range]
        since = None if back is None else now - back
        start, end = moment(self.start), moment(self.end, last=True)
        return SessionFilter(
            search=self.q or None,
            model=self.model or None,
            caller=self.caller or None,
            user=self.user or None,
            tag=self.tag or None,
            status=self.status or None,
            since=start if start is not None else None if self.end else since,
            until=end,
            sort=self.sort,
            descending=self.dir == "desc",
        )

    def url(self, **changes: object) -> str:
        """This list's URL with ``changes`` applied; defaults are left out so links stay short."""
        form = replace(self, **changes)  # type: ignore[arg-type]
        default = SessionsForm()
        query = {
            key: value
            for key, value in (
                ("q", form.q),
                ("model", form.model),
                ("caller", form.caller),
                ("user", form.user),
                ("tag", form.tag),
                ("status", form.status),
                ("range", form.range),
                ("from", form.start),
                ("to", form.end),
                ("sort", form.sort),
                ("dir", form.dir),
                ("page", form.page),
                ("per", form.per_page),
            )
            if value != getattr(default, _FIELDS.get(key, key))
        }
        return "/ui" + (f"?{urlencode(query)}" if query else "")

    def sort_url(self, key: str) -> str:
        """Sort by ``key``; the column already sorted by flips its direction."""
        flip = "asc" if self.sort == key and self.dir == "desc" else "desc"
        return self.url(sort=key, dir=flip, page=1)

    def pages(self, total: int) -> int:
        return max((total + self.per_page - 1) // self.per_page, 1)

    def within(self, total: int) -> SessionsForm:
        """This form with its page inside the list (``?page=999`` of 3 pages shows page 3)."""
        return replace(self, page=min(self.page, self.pages(total)))


@dataclass(frozen=True, slots=True)
class ChartColumn:
    turn: int
    request_id: str
    x: float
    width: float
    sent: float  # height of the tokens sent
    original: float  # height of the tokens the client sent (outline)
    cached: float
    mark: str  # "compaction", "tools", "error" or ""
    tokens_sent: int
    tokens_original: int


def turn_chart(turns: Sequence[TurnRow], width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> list[ChartColumn]:
    """One column per turn: tokens sent, the original as an outline, the cached part, and the marks."""
    if not turns:
        return []
    top = max(max(t.tokens_original, t.prompt_tokens or t.tokens_assembled) for t in turns) or 1
    step = width / len(turns)
    out = []
    for i, t in enumerate(turns):
        mark = "error" if t.status >= 400 else "compaction" if t.compacted else "tools" if t.tool_set_changed else ""
        out.append(
            ChartColumn(
                turn=t.turn,
                request_id=t.request_id,
                x=i * step,
                width=max(step * 0.8, 0.5),
                sent=height * (t.prompt_tokens or t.tokens_assembled) / top,
                original=height * t.tokens_original / top,
                cached=height * t.cached_tokens / top,
                mark=mark,
                tokens_sent=t.prompt_tokens or t.tokens_assembled,
                tokens_original=t.tokens_original,
            )
        )
    return out
