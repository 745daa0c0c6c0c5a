"""The long-lived objects a running gateway shares between requests, built once at start-up."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gateway.api.incremental_parse import IncrementalParser
from gateway.calibration import Calibration
from gateway.config import ModelConfig, Settings
from gateway.edges.edges import Edges
from gateway.memos import Memos
from gateway.sessions.conversations import ConversationIndex
from gateway.sessions.protocol import SessionStore
from gateway.sessions.resent import ResentHistory
from gateway.store.record import Recorder
from gateway.tokens import TokenCounter, counter_for, encoding_for_model
from gateway.upstream.model_info import ModelInfo, model_info
from gateway.upstream.router import UpstreamRouter


@dataclass(slots=True)
class Gateway:
    settings: Settings
    upstream: UpstreamRouter
    sessions: SessionStore
    recorder: Recorder
    edges: Edges  # the steps around assembly that do I/O, built at start-up (edges/edges.py)
    started_at: float = field(default_factory=time.time)
    calibration: Calibration = field(default_factory=Calibration)
    resent: ResentHistory = field(default_factory=ResentHistory)  # last turn's objects, so a turn costs what is new
    parser: IncrementalParser = field(default_factory=IncrementalParser)  # last turn's bytes, parsed once
    conversations: ConversationIndex = field(default_factory=ConversationIndex)  # headerless sessions that diverge
    memos: Memos = field(default_factory=Memos)  # the passes' caches between requests, this gateway's own
    #: Whether the loop's thread holds the short slice (``sched_slice``, set by the app's lifespan): then the
    #: bookkeeping after an answer first gives way to the client the answer woke.
    gives_way: bool = False
    #: Forwarded requests not finished yet (``answer.InFlight`` made, its record not built): the bookkeeping
    #: after an answer gives way only when its own request is the last, so no request waiting on the loop
    #: loses the core to a neighbour. A request that never finished would only keep it from giving way.
    in_flight: int = 0
    _infos: dict[str, ModelInfo] = field(default_factory=dict)

    def info(self, model: ModelConfig) -> ModelInfo:
        found = self._infos.get(model.name)
        if found is None:
            found = self._infos[model.name] = model_info(model.litellm_model, model.context_window)
        return found

    def load_tokenizers(self) -> None:
        """Load every configured model's tokenizer now: the first load reads the BPE file and
        builds its tables (~0.3-1 s of CPU), which must not happen on the event loop under the
        first request. Called at start-up, before the server accepts connections."""
        for model in self.settings.models:
            self.counter(model).text("warm")

    def counter(self, model: ModelConfig) -> TokenCounter:
        return counter_for(model.tokenizer or encoding_for_model(model.litellm_model))
