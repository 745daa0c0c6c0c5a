"""Ventana: an OpenAI-compatible gateway that engineers the context window of every request.

Importing the package pins the two offline facts of this environment before any library
reads them: tiktoken's BPE files come from the copy bundled in the litellm wheel, and
litellm uses its bundled price map instead of fetching one at import.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["__version__"]
__version__ = "0.1.0"


def _pin_offline_resources() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return
    bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    if bundled.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)


_pin_offline_resources()
