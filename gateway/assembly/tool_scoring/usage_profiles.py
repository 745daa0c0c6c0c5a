"""Usage profiles: what users said before the model called each tool (Tool2Vec-style).

A tool's description is written by its author; users ask in their own words, and on
paraphrase-heavy catalogues the description is the weak half of the match. A gateway sees
which tools the model actually called after which user turns, so each tool gets a profile:
the running mean of the embeddings of the user turns after which the model called it. The
embedding scorers then score a tool by its description *and* by its profile, so a request
phrased like earlier ones that needed the tool keeps it (MetaTool-47 held-out recall 0.973 ->
0.992 at 60 % tool tokens removed; see benchmarks/RESULTS.md, "Usage profiles").

Profiles are keyed by the tool's identity: its name and a hash of its whole definition, so a
tool whose description or parameters change starts a fresh profile instead of inheriting
examples of what it used to do. The store is bounded (least recently updated tools are
forgotten first), thread-safe, and hands out read-only snapshots: a request scores against
the profiles as they were when it started, and a later observation never mutates a vector
a running selection holds.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import orjson

from gateway.assembly.tool_scoring.documents import tool_name

#: Tools whose profile is kept; the least recently updated is forgotten beyond this.
DEFAULT_MAX_PROFILES = 10_000
#: A profile averages its last ~N examples: past N, each new example weighs 1/N (exponential
#: decay), so a tool whose usage drifts follows it and old examples fade.
DEFAULT_MAX_EXAMPLES = 200

_EMPTY: Mapping[str, np.ndarray] = MappingProxyType({})


def tool_key(tool: Mapping[str, Any]) -> str:
    """The tool's identity for profiles: its name and a short hash of its canonical JSON definition."""
    try:
        canonical = orjson.dumps(tool, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-encodable (e.g. an integer past 64 bits): fall back to repr
        canonical = repr(sorted(tool.items(), key=lambda kv: str(kv[0]))).encode()
    return f"{tool_name(tool)}#{hashlib.sha256(canonical).hexdigest()[:16]}"


def tool_keys(tools: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Name -> key of each named tool (the first definition of a repeated name, as the scorer reads it)."""
    keys: dict[str, str] = {}
    for tool in tools:
        name = tool_name(tool)
        if name and name not in keys:
            keys[name] = tool_key(tool)
    return keys


class UsageProfiles:
    """Per-tool running mean of the query embeddings after which the tool was called.

    ``observe`` is called from the request's finishing edge (any thread); ``snapshot`` from the
    start of a request. Snapshots are immutable: each ``observe`` publishes a new mapping
    (copy-on-write), and the vectors in it are read-only arrays never written again.
    """

    def __init__(self, max_profiles: int = DEFAULT_MAX_PROFILES, max_examples: int = DEFAULT_MAX_EXAMPLES) -> None:
        if max_profiles <= 0 or max_examples <= 0:
            raise ValueError("max_profiles and max_examples must be positive")
        self.max_profiles = max_profiles
        self.max_examples = max_examples
        self._lock = threading.Lock()
        self._means: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()  # key -> (mean, examples)
        self._view: Mapping[str, np.ndarray] = _EMPTY

    def __len__(self) -> int:
        return len(self._means)

    def examples(self, key: str) -> int:
        found = self._means.get(key)
        return found[1] if found else 0

    def snapshot(self) -> Mapping[str, np.ndarray]:
        """Key -> unit-length profile vector, as of now; never changes afterwards."""
        return self._view

    def observe(self, keys: Iterable[str], vector: np.ndarray) -> None:
        """The model called the tools ``keys`` after a turn whose embedding is ``vector``."""
        v = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        if not np.isfinite(norm) or norm == 0.0:
            return
        v = v / norm
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
        with self._lock:
            view = dict(self._view)
            for key in keys:
                mean, n = self._means.pop(key, (None, 0))
                n += 1
                mean = v.copy() if mean is None else mean + (v - mean) / min(n, self.max_examples)
                self._means[key] = (mean, n)  # re-inserted last: most recently updated
                view[key] = _unit(mean)
            while len(self._means) > self.max_profiles:
                old, _ = self._means.popitem(last=False)
                view.pop(old, None)
            self._view = MappingProxyType(view)

    def clear(self) -> None:
        with self._lock:
            self._means.clear()
            self._view = _EMPTY


def _unit(mean: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(mean))
    out = mean / norm if norm > 0 else mean.copy()
    out.flags.writeable = False
    return out
