"""Memory that outlives the context window: archived history (episodic) and user facts (long-term).

``extract_facts`` finds facts by rules (pure); ``archive`` and ``profile`` read and write
the store's ``memory_passages`` and ``memory_facts`` tables; ``commands`` backs
``ventana memory``. The recall pass itself is pure and lives in ``assembly/recall_memory.py``.
"""

from __future__ import annotations

from gateway.memory.extract_facts import extract_facts

__all__ = ["extract_facts"]
