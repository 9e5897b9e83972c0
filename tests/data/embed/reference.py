#!/usr/bin/env python3
"""Independent reference embeddings for sentence-transformers/all-MiniLM-L6-v2.

This is a plain-numpy (no torch, no transformers, no sentence-transformers)
implementation of the BERT encoder forward pass, used to produce the fixture
``tests/data/embed/reference.json`` against which the Rust (candle)
implementation is tested.

Recipe (identical to the sentence-transformers all-MiniLM-L6-v2 pipeline):

* tokenize with the HF ``tokenizers`` package from ``tokenizer.json``,
  truncation to 256 tokens (``sentence_bert_config.json`` max_seq_length),
  padding disabled (the tokenizer.json ships with Fixed(128) padding and
  128-token truncation, both overridden here);
* embeddings = word + absolute position + token_type(0), then LayerNorm
  (eps = ``layer_norm_eps`` from config.json, 1e-12);
* ``num_hidden_layers`` (6) post-LN transformer layers: multi-head
  self-attention (12 heads, additive attention mask of -inf-like values on
  padded keys), attention output dense + residual + LayerNorm, intermediate
  dense + exact erf GELU, output dense + residual + LayerNorm;
* mean pooling of the last hidden state over the attention mask, then L2
  normalisation.

All arithmetic is done in float64 (the weights are float32); values are
rounded to 6 decimals in the JSON.  Each sentence is encoded on its own
(no padding); as a self-check of the masking code path the script also
encodes all sentences as one right-padded batch and asserts the result
agrees.

The JSON also contains a ``pooling`` section: a tiny synthetic case
(hidden states [2,3,2], mask [2,3]) pooled and normalised by hand with numpy,
so a Rust unit test can check pooling without loading the model.

Produced with:

    pip install numpy safetensors tokenizers
    python3 tests/data/embed/reference.py MODEL_DIR > tests/data/embed/reference.json

and, for the domain-adapted model the repository ships (fp16 weights, read as float64 here),

    python3 tests/data/embed/reference.py models/minilm-api > tests/data/embed/reference-api.json

where MODEL_DIR holds config.json, tokenizer.json, model.safetensors and
1_Pooling/config.json of all-MiniLM-L6-v2.
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "This is an example sentence",
    "Each sentence is converted",
    "hand out a virtual card to an employee",
    "List pull requests for a repository",
]
MAX_SEQ_LEN = 256

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """Exact (erf) GELU, as used by HF BERT's "gelu" activation."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def linear(x, w, b):
    # PyTorch Linear layout: weight is [out, in].
    return x @ w.T + b


class Bert:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        raw = load_file(os.path.join(model_dir, "model.safetensors"))
        prefix = "bert." if any(k.startswith("bert.") for k in raw) else ""
        self.w = {
            k[len(prefix):]: v.astype(np.float64)
            for k, v in raw.items()
            if k.startswith(prefix) and v.dtype.kind == "f"
        }
        self.eps = float(self.cfg["layer_norm_eps"])
        self.hidden = int(self.cfg["hidden_size"])
        self.heads = int(self.cfg["num_attention_heads"])
        self.layers = int(self.cfg["num_hidden_layers"])
        assert self.cfg["hidden_act"] == "gelu"
        assert self.cfg.get("position_embedding_type", "absolute") == "absolute"

    def forward(self, ids, mask):
        """ids, mask: int arrays [batch, seq]. Returns last hidden state [b, s, h]."""
        w, eps = self.w, self.eps
        b, s = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(s)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

        nh, hd = self.heads, self.hidden // self.heads
        # Additive mask over keys, same convention as HF (large negative).
        add_mask = (1.0 - mask.astype(np.float64))[:, None, None, :] * np.finfo(np.float64).min

        def split(t):
            return t.reshape(b, s, nh, hd).transpose(0, 2, 1, 3)

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = split(linear(x, w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"]))
            k = split(linear(x, w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"]))
            v = split(linear(x, w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"]))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + add_mask
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs = probs / probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, self.hidden)
            attn = linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
            x = layer_norm(attn + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], eps)
            inter = gelu(linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
            out = linear(inter, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
            x = layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        return x


def mean_pool_normalize(hidden, mask):
    """sentence-transformers mean pooling followed by L2 normalisation."""
    m = mask.astype(np.float64)[:, :, None]
    summed = (hidden * m).sum(axis=1)
    counts = np.clip(m.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)


def r6(a):
    return [r6(x) for x in a] if isinstance(a, (list, np.ndarray)) and np.ndim(a) > 0 else round(float(a), 6)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} MODEL_DIR > reference.json")
    model_dir = sys.argv[1]

    with open(os.path.join(model_dir, "1_Pooling", "config.json")) as f:
        pcfg = json.load(f)
    assert pcfg["pooling_mode_mean_tokens"] and not (
        pcfg["pooling_mode_cls_token"] or pcfg["pooling_mode_max_tokens"]
        or pcfg["pooling_mode_mean_sqrt_len_tokens"]
    ), pcfg

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_SEQ_LEN)
    encs = tok.encode_batch(SENTENCES)

    model = Bert(model_dir)

    # One sentence at a time, no padding.
    embs = []
    for e in encs:
        ids = np.array([e.ids], dtype=np.int64)
        mask = np.array([e.attention_mask], dtype=np.int64)
        embs.append(mean_pool_normalize(model.forward(ids, mask), mask)[0])
    embs = np.stack(embs)

    # Self-check of the mask path: right-padded batch must give the same result.
    s = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), s), dtype=np.int64)
    mask = np.zeros((len(encs), s), dtype=np.int64)
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)] = e.ids
        mask[i, : len(e.ids)] = e.attention_mask
    batched = mean_pool_normalize(model.forward(ids, mask), mask)
    assert np.abs(batched - embs).max() < 1e-9, np.abs(batched - embs).max()

    assert np.allclose(np.linalg.norm(embs, axis=1), 1.0, atol=1e-12)
    cosine = embs @ embs.T

    # Tiny synthetic pooling case, computed by hand with numpy.
    ph = np.array([[[1, 2], [3, 4], [5, 6]], [[1, 0], [0, 1], [7, 7]]], dtype=np.float64)
    pm = np.array([[1, 1, 0], [1, 1, 1]], dtype=np.int64)
    mean = (ph * pm[:, :, None]).sum(axis=1) / pm.sum(axis=1, keepdims=True)  # [[2,3],[8/3,8/3]]
    normalized = mean / np.linalg.norm(mean, axis=1, keepdims=True)

    out = {
        "model": "all-MiniLM-L6-v2",
        "sentences": [
            {"text": t, "token_ids": list(e.ids), "embedding": r6(v)}
            for t, e, v in zip(SENTENCES, encs, embs)
        ],
        "cosine": r6(cosine),
        "pooling": {
            "hidden_states": ph.astype(int).tolist(),
            "attention_mask": pm.tolist(),
            "mean_pooled": r6(mean),
            "normalized": r6(normalized),
        },
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
