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

Profiles outlive the process through the store (``store/tool_profiles.py``): observations
accumulate as a *delta* (sum of unit vectors and a count per tool) that the runtime takes,
merges into the shared rows and replaces with what the rows then hold, so workers and
restarts see every observation once. The merge is the same running mean, applied in bulk
(``fold``): k examples at once weigh what k single updates would while a profile is young.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Delta:
    """Observations of one tool not yet merged into the store: their sum of unit vectors and count."""

    total: np.ndarray
    count: int

    def plus(self, other: Delta) -> Delta:
        return Delta(self.total + other.total, self.count + other.count)


@dataclass(frozen=True)
class StoredProfile:
    """One tool's profile as the store holds it: the running mean (not normalised) and its examples."""

    key: str
    mean: np.ndarray
    examples: int
    updated_at: float = 0.0


def fold(mean: np.ndarray | None, examples: int, delta: Delta, max_examples: int) -> tuple[np.ndarray, int]:
    """``mean`` over ``examples`` with ``delta``'s examples added: the exact mean while the total stays
    within ``max_examples``, past it each new example weighs 1/max_examples (as ``observe`` does)."""
    total = examples + delta.count
    if mean is None or examples <= 0:
        return (delta.total / delta.count).astype(np.float32), total
    weight = min(1.0, delta.count / max(min(total, max_examples), 1))
    return (mean + (delta.total / delta.count - mean) * weight).astype(np.float32), total


def tool_key(tool: Mapping[str, Any], caller: str = "") -> str:
    """The tool's identity for profiles: its name, a short hash of its canonical JSON definition,
    and the caller who taught it. Learning is a caller's own: what key B says before calling a
    tool must not move it in or out of key A's kept set (nor tell B what A asks for)."""
    try:
        canonical = orjson.dumps(tool, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-encodable (e.g. an integer past 64 bits): fall back to repr
        canonical = repr(sorted(tool.items(), key=lambda kv: str(kv[0]))).encode()
    key = f"{tool_name(tool)}#{hashlib.sha256(canonical).hexdigest()[:16]}"
    return f"{key}@{caller}" if caller else key


def tool_keys(tools: Iterable[Mapping[str, Any]], caller: str = "") -> dict[str, str]:
    """Name -> key of each named tool (the first definition of a repeated name, as the scorer reads it)."""
    keys: dict[str, str] = {}
    for tool in tools:
        name = tool_name(tool)
        if name and name not in keys:
            keys[name] = tool_key(tool, caller)
    return keys


class UsageProfiles:
    """Per-tool running mean of the query embeddings after which the tool was called.

    ``observe`` is called from the request's finishing edge (any thread); ``snapshot`` from the
    start of a request. Snapshots are immutable: each ``observe`` publishes a new mapping
    (copy-on-write), and the vectors in it are read-only arrays never written again.
    """

    def __init__(
        self,
        max_profiles: int = DEFAULT_MAX_PROFILES,
        max_examples: int = DEFAULT_MAX_EXAMPLES,
        *,
        track_delta: bool = False,
    ) -> None:
        if max_profiles <= 0 or max_examples <= 0:
            raise ValueError("max_profiles and max_examples must be positive")
        self.max_profiles = max_profiles
        self.max_examples = max_examples
        self.track_delta = track_delta  # only when something stores the deltas: else they would pile up
        self._lock = threading.Lock()
        self._means: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()  # key -> (mean, examples)
        self._view: Mapping[str, np.ndarray] = _EMPTY
        self._delta: dict[str, Delta] = {}  # observed here, not yet in the store

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
                old_mean, old_n = self._means.pop(key, (None, 0))
                mean, n = fold(old_mean, old_n, Delta(v, 1), self.max_examples)
                self._means[key] = (mean, n)  # re-inserted last: most recently updated
                view[key] = _unit(mean)
                if self.track_delta:
                    found = self._delta.get(key)
                    self._delta[key] = Delta(v.copy(), 1) if found is None else found.plus(Delta(v, 1))
            self._publish(view)

    def take_delta(self) -> dict[str, Delta]:
        """The observations not yet stored, handed over (and forgotten here) for a merge."""
        with self._lock:
            taken, self._delta = self._delta, {}
        return taken

    def return_delta(self, delta: Mapping[str, Delta]) -> None:
        """A merge that failed gives its observations back, to be merged next time."""
        with self._lock:
            for key, d in delta.items():
                found = self._delta.get(key)
                self._delta[key] = d if found is None else d.plus(found)

    def apply_stored(self, rows: Iterable[StoredProfile]) -> None:
        """Adopt the store's profiles (which hold every worker's merged observations); what was
        observed here since the delta was taken is folded on top, so it is not lost."""
        with self._lock:
            view = dict(self._view)
            for row in rows:
                mean = np.asarray(row.mean, dtype=np.float32)
                if row.examples <= 0 or not np.all(np.isfinite(mean)):
                    continue
                n = row.examples
                pending = self._delta.get(row.key)
                if pending is not None:
                    mean, n = fold(mean, n, pending, self.max_examples)
                self._means.pop(row.key, None)
                self._means[row.key] = (mean, n)
                view[row.key] = _unit(mean)
            self._publish(view)

    def _publish(self, view: dict[str, np.ndarray]) -> None:
        """Bound the store (least recently updated first) and publish ``view`` as the new snapshot."""
        while len(self._means) > self.max_profiles:
            old, _ = self._means.popitem(last=False)
            view.pop(old, None)
        while len(self._delta) > self.max_profiles:  # a store down for long: the oldest wait is dropped
            del self._delta[next(iter(self._delta))]
        self._view = MappingProxyType(view)

    def clear(self) -> None:
        with self._lock:
            self._means.clear()
            self._delta.clear()
            self._view = _EMPTY


def _unit(mean: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(mean))
    out = mean / norm if norm > 0 else mean.copy()
    out.flags.writeable = False
    return out
