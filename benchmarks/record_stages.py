"""The cost of a request's record: build it from its stages, read every stored value, make its flat dict.

``RequestRecord`` is composed of ``Forwarded``, ``Counts``, ``Answer`` and ``Outcome``; its stored
values are properties of the stage holding them. Run against two checkouts to compare:

    PYTHONPATH=/work/main python -m benchmarks.record_stages
"""

from __future__ import annotations

import tempfile
import timeit

import orjson

from gateway.store.journal import Journal
from gateway.store.record import (
    FLAT_FIELDS,
    TRANSIENT_FIELDS,
    Answer,
    Counts,
    Forwarded,
    Outcome,
    RequestRecord,
    record_dict,
    request_record,
)
from gateway.store.redact import Redactor
from gateway.store.spool import record_line
from gateway.upstream.usage import Usage

#: The 29 stored values the writer, the metrics and the JSONL log read (the transient bytes left out).
NAMES = tuple(name for name in FLAT_FIELDS if name not in TRANSIENT_FIELDS)


def per_call_us(fn: object, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi " * 50}] * 20}
    decisions = tuple({"pass": f"p{i}"} for i in range(8))
    sent = Forwarded("req-1", "s", 1.5, "m", "openai", "c", body, body, decisions, turn=3)
    counts = Counts(1000, 800, {"total": 800}, ())
    answer = Answer(None, "ok", "stop", None, Usage(prompt_tokens=800, completion_tokens=10))
    outcome = Outcome(200, None, 0.5, 3.0, 4.0)
    record = request_record(sent, counts, answer, outcome)
    build = per_call_us(lambda: request_record(sent, counts, answer, outcome), 20_000)
    read = per_call_us(lambda: [getattr(record, name) for name in NAMES], 20_000)
    flat = per_call_us(lambda: record_dict(record), 2_000)
    print(f"build {build:.2f} us, read all {len(NAMES)} values {read:.2f} us, record_dict {flat:.0f} us")
    journal_costs(record)


def journal_costs(record: RequestRecord) -> None:
    """What journaling a record costs the request path (session 36): its line, and one append."""
    raw = orjson.dumps(record.original)
    carried = record.changed(original_json=raw, assembled_json=raw)
    redactor = Redactor((), secrets=True)
    redactor.record(carried)
    redact = per_call_us(lambda: redactor.record(carried), 2_000)  # the request's bodies seen: memo
    line = per_call_us(lambda: record_line(carried), 2_000)
    encoded = record_line(carried)
    with tempfile.TemporaryDirectory() as d:
        journal = Journal(f"{d}/spool.jsonl")
        journal.open()
        append = per_call_us(lambda: journal.append(record.request_id, encoded), 2_000)
        journal.close()
    print(
        f"journal: redact (bodies seen) {redact:.1f} us, line {line:.1f} us ({len(encoded)} bytes), "
        f"append {append:.1f} us"
    )


if __name__ == "__main__":
    main()
