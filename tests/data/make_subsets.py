"""Cut ``tests/data/`` from the full public files, so a clone's tests need nothing beside it.

The full files (tens of MB) live in a ``shared/`` folder outside the repository (see
``tests/shared_data.py``); the tests read only the rows written here. Every cut is a
deterministic selection of whole rows (or, for the OpenAPI description, of whole schemas),
unchanged, so a figure a test computes is one the full file would give on those rows.
Rerun after changing a cut:

    python tests/data/make_subsets.py [--shared ../shared]

and update ``tests/data/README.md`` if a file's rows change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.shared_data import shared_dir  # noqa: E402

Rows = list[dict[str, Any]]


def _all(rows: Rows) -> Rows:
    return rows


def _first(n: int) -> Callable[[Rows], Rows]:
    def pick(rows: Rows) -> Rows:
        return rows[:n]

    return pick


def _first_with_twins(n: int) -> Callable[[Rows], Rows]:
    """The first ``n`` runs, then every other run of the same tasks (the file's second model
    ran each task too): replay must tell runs with one opening apart, as on the full file."""

    def pick(rows: Rows) -> Rows:
        tasks = {r["meta"]["task_id"] for r in rows[:n]}
        return rows[:n] + [r for r in rows[n:] if r["meta"]["task_id"] in tasks]

    return pick


def _smallest_chat_run(rows: Rows) -> Rows:
    """The smallest deepseek-chat run (the file's first run is one too); the reasoner's runs carry
    ``reasoning_content``, which the Responses benchmark's item translation does not model."""
    return _smallest([r for r in rows if r["meta"]["model"] == "deepseek/deepseek-chat"])


def _smallest(rows: Rows) -> Rows:
    return [min(rows, key=lambda r: len(orjson.dumps(r)))]


def _bfcl(rows: Rows) -> Rows:
    """Every case offering 8 or more tools (the default ``min_offered``: the only ones pruning
    acts on, 47 of 1,477), and every 40th of the rest, in file order."""
    return [r for n, r in enumerate(rows) if len(r["tools"]) >= 8 or n % 40 == 0]


def _metatool(rows: Rows) -> Rows:
    """Every 8th of the 47-tool cases (the sample tests/assembly/test_prune_tools_data.py measured
    on the full file), with the 2nd and 3rd rewordings of the first query after it, which
    tests/e2e/test_tool_profiles_e2e.py teaches a tool with."""
    small = [r for r in rows if len(r["tools"]) == 47]
    sample = small[::8]
    return [sample[0], small[1], small[2], *sample[1:]]


#: (file under shared/data, how the rows are cut, its licence file(s) under shared/data)
CUTS: tuple[tuple[str, Callable[[Rows], Rows], tuple[str, ...]], ...] = (
    ("toolbench.jsonl", _all, ("toolbench.LICENSE",)),
    ("bfcl_memory.jsonl", _all, ("bfcl.LICENSE",)),
    ("bfcl.jsonl", _bfcl, ("bfcl.LICENSE",)),
    ("metatool.jsonl", _metatool, ("metatool.LICENSE",)),
    ("agent_loops/tau2_telecom_solo.jsonl", _first_with_twins(3), ("agent_loops/LICENSE.tau2_telecom",)),
    ("agent_loops/tau2_telecom_default.jsonl", _first(3), ("agent_loops/LICENSE.tau2_telecom",)),
    ("agent_loops/mini_swe_agent_deepseek.jsonl", _smallest_chat_run, ("agent_loops/LICENSE.mini_swe_agent",)),
    ("long_conversations/rhelm.jsonl", _smallest, ("long_conversations/LICENSE.rhelm",)),
)

#: Schemas the conformance tests validate against; the cut keeps these and every schema they reach.
SPEC_ROOTS = (
    "CreateChatCompletionRequest",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "ListModelsResponse",
    "Model",
    "ErrorResponse",
    "CreateResponse",
    "Response",
    "ResponseItemList",
    "ResponseStreamEvent",
    "InputItem",
)
#: The one operation tests/api/test_fuzz_openapi.py fuzzes.
SPEC_PATHS = {"/chat/completions": ("post",)}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def spec_subset(spec: dict[str, Any]) -> dict[str, Any]:
    """The operations and schemas the tests use, each unchanged, with every ``$ref`` they reach."""
    paths = {p: {m: spec["paths"][p][m] for m in methods} for p, methods in SPEC_PATHS.items()}
    todo = [f"#/components/schemas/{name}" for name in SPEC_ROOTS] + list(_refs(paths))
    kept: dict[str, dict[str, Any]] = {}
    while todo:
        ref = todo.pop()
        _, _, kind, name = ref.split("/", 3)
        if name in kept.setdefault(kind, {}):
            continue
        node = spec["components"][kind][name]
        kept[kind][name] = node
        todo.extend(_refs(node))
    components = {kind: {n: kept[kind][n] for n in spec["components"][kind] if n in kept[kind]} for kind in kept}
    return {"openapi": spec["openapi"], "info": spec["info"], "paths": paths, "components": components}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=shared_dir(), help="the shared/ folder (data/, specs/)")
    args = parser.parse_args()
    source = args.shared / "data"
    for name, cut, licences in CUTS:
        lines = [line for line in (source / name).read_bytes().splitlines() if line.strip()]
        rows = [orjson.loads(line) for line in lines]
        raw = {id(row): line for row, line in zip(rows, lines, strict=True)}
        kept = cut(rows)
        out = HERE / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join(raw[id(r)] + b"\n" for r in kept))  # the lines as written, byte for byte
        for licence in licences:
            shutil.copyfile(source / licence, HERE / licence)
        print(f"{name}: {len(kept)} of {len(rows)} rows, {out.stat().st_size:,} bytes")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    spec = yaml.load((args.shared / "specs" / "openai-openapi.yaml").read_text(encoding="utf-8"), Loader=loader)
    out = HERE / "specs" / "openai-openapi.json"
    out.parent.mkdir(exist_ok=True)
    subset = spec_subset(spec)
    # json, not orjson: the spec holds an integer wider than 64 bits
    out.write_text(json.dumps(subset, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    shutil.copyfile(args.shared / "specs" / "openai-openapi.LICENSE", HERE / "specs" / "openai-openapi.LICENSE")
    schemas = subset["components"]["schemas"]
    print(
        f"specs/openai-openapi.json: {len(schemas)} of {len(spec['components']['schemas'])} schemas, "
        f"{out.stat().st_size:,} bytes"
    )


if __name__ == "__main__":
    main()
