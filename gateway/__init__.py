"""Ventana: an OpenAI-compatible gateway that engineers the context window of every request.

Importing the package pins the offline facts of this environment before any library
reads them: tiktoken's BPE files come from the copy bundled in the litellm wheel, and
litellm never fetches anything on its own: its price map at import, its Anthropic beta-header
map on the first request that carries ``anthropic-beta`` (what Claude Code sends), and
Hugging Face tokenizers all come from the copies bundled in the wheel (or are skipped).
Requests to the upstreams the config names are unaffected. An operator who wants a fetch
sets the variable to ``False`` before starting.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["LITELLM_OFFLINE", "__version__"]
__version__ = "0.1.0"


#: litellm's switches for what it would otherwise download: ``LITELLM_OFFLINE_MODE`` covers
#: every fetch of its own in current releases; the other two are what older releases read.
LITELLM_OFFLINE = ("LITELLM_OFFLINE_MODE", "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS")


def _pin_offline_resources() -> None:
    for name in LITELLM_OFFLINE:
        if not os.environ.get(name):  # unset or empty; an explicit value is the operator's choice
            os.environ[name] = "True"
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return
    bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    if bundled.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)


_pin_offline_resources()
