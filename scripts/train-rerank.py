#!/usr/bin/env python3
"""Trains the learned rerank of `src/index/learned.rs` and writes `src/index/learned.json`.

The data is what `examples/eval.rs --features` dumps: for each query, the first stage's best
20 operations with their features and whether each is an expected answer. The model is
linear; it is trained pairwise (each expected operation against each other candidate of the
same query, a logistic loss, every query weighing the same) and regularised towards the
first stage's own order (all weight on the `stage` feature), so it moves away from that
order only as far as the data pulls it.

Before it writes anything it reports, for each query set held out in turn, the metrics of
the first stage and of a model trained on the other sets (R@1 / R@5 / MRR@10 over the
queries, the same numbers `apigate eval` gives, since only the top 20 is reordered).

    cargo build --example eval
    target/debug/examples/eval --features /tmp/features.jsonl --ranker hybrid --pooled \\
        --queries tests/data/queries/dev.jsonl,tests/data/index-extra-queries.jsonl,tests/data/fresh-queries.jsonl
    python3 scripts/train-rerank.py /tmp/features.jsonl [--lambda 0.1] [--write]

Needs numpy. The blind set must never be given to it (tests/data/queries/README.md).
"""

import argparse
import json
import sys

import numpy as np

FEATURES = [
    "stage", "stage_rank", "lexical", "lexical_rank", "cosine", "cosine_gap", "dense_rank",
    "coverage", "intent", "resource", "depth", "confident_lexical", "unsure_cosine",
]


def load(path):
    queries = []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if "blind" in row["set"]:
                sys.exit("the blind set is never trained on")
            x = np.array([c["features"] for c in row["candidates"]], dtype=np.float64)
            y = np.array([c["expected"] for c in row["candidates"]], dtype=bool)
            queries.append({"set": row["set"], "pooled": row["pooled"], "x": x, "y": y})
    return queries


def metrics(queries, w):
    r1 = r5 = mrr = 0.0
    for q in queries:
        if len(q["y"]) == 0:
            continue
        order = np.argsort(-(q["x"] @ w), kind="stable")
        hits = np.nonzero(q["y"][order])[0]
        if len(hits):
            rank = hits[0] + 1
            r1 += rank == 1
            r5 += rank <= 5
            mrr += 1.0 / rank if rank <= 10 else 0.0
    n = max(len(queries), 1)
    return r1 / n, r5 / n, mrr / n


def train(queries, lam, steps=3000, lr=0.5):
    w0 = np.zeros(len(FEATURES))
    w0[0] = 1.0
    diffs, weights = [], []
    for q in queries:
        pos, neg = q["x"][q["y"]], q["x"][~q["y"]]
        if len(pos) == 0 or len(neg) == 0:
            continue
        d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, len(FEATURES))
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    d = np.concatenate(diffs)
    pw = np.concatenate(weights) / len(diffs)
    w = w0.copy()
    for _ in range(steps):
        margin = d @ w
        # d/dw of log(1 + exp(-margin)), weighted per query
        g = -(d * (pw * (1.0 / (1.0 + np.exp(np.clip(margin, -50, 50)))))[:, None]).sum(0)
        g += 2 * lam * (w - w0)
        w -= lr * g
    return w


def fmt(m):
    return "%.3f / %.3f / %.3f" % m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--lambda", dest="lam", type=float, default=0.1)
    ap.add_argument("--write", action="store_true", help="write src/index/learned.json")
    ap.add_argument("--out", default="src/index/learned.json")
    a = ap.parse_args()
    queries = load(a.features)
    base = np.zeros(len(FEATURES))
    base[0] = 1.0
    sets = sorted({q["set"] for q in queries})
    print(f"lambda {a.lam}; R@1 / R@5 / MRR@10, first stage -> learned on the other sets")
    total = {False: [np.zeros(3), np.zeros(3), 0], True: [np.zeros(3), np.zeros(3), 0]}
    for held in sets:
        w = train([q for q in queries if q["set"] != held], a.lam)
        for pooled in (False, True):
            test = [q for q in queries if q["set"] == held and q["pooled"] == pooled]
            if not test:
                continue
            b, l = metrics(test, base), metrics(test, w)
            t = total[pooled]
            t[0] += np.array(b) * len(test)
            t[1] += np.array(l) * len(test)
            t[2] += len(test)
            label = "pooled" if pooled else "per spec"
            print(f"  {held:<22} {label:<8} {fmt(b)} -> {fmt(l)}  (n={len(test)})")
    for pooled, (b, l, n) in total.items():
        if n:
            label = "pooled" if pooled else "per spec"
            print(f"  {'ALL (held out)':<22} {label:<8} {fmt(tuple(b / n))} -> {fmt(tuple(l / n))}")
    w = train(queries, a.lam)
    print("weights (all sets):")
    for name, value in zip(FEATURES, w):
        print(f"  {name:<18} {value:+.4f}")
    if a.write:
        with open(a.out, "w") as f:
            json.dump({"features": FEATURES, "weights": [round(float(v), 5) for v in w],
                       "lambda": a.lam, "trained_on": sets}, f, indent=1)
            f.write("\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
