#!/usr/bin/env python3
"""The `use crate::…` graph of src/: import circles between files, and arrows between top-level
modules that the module table of docs/design.md does not allow.

    python3 scripts/import-graph.py            # summary; exit 1 on a circle or a forbidden arrow
    python3 scripts/import-graph.py --edges    # also every file-to-file arrow

A node is a file (its module path: src/upstream/config.rs is upstream::config, a mod.rs is its
folder). An arrow is any path into the crate a file names outside its `#[cfg(test)]` modules:
`use crate::…`, `use super::…`, or a path written inline (`crate::spec::Method`), resolved to the
longest module prefix that is a file. A parent's arrows to its own children are left out:
declaring and re-exporting them is what a mod.rs is for; a child reaching back to its parent
counts. The allowed arrows come from the table's third column ("imports (crate / external)"):
the backticked module paths before the " / " (`upstream::headers` allows that file only),
`everything`, or `none`; a row that says "any module may use it" is a leaf open to all. The
crate root (lib.rs: `error_chain`, `secrets_equal`) may be used by every module.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def module_of(path: Path) -> tuple:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text: str) -> str:
    # Line comments (doc comments included) and block comments; string literals are left alone,
    # which is safe enough here: the regexes below only look for paths.
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def strip_test_modules(text: str) -> str:
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def use_paths(tree: str, prefix=()):
    """The full paths in one use tree (`a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e)."""
    tree = tree.strip()
    depth, brace = 0, None
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                brace = k
            depth += 1
        elif ch == "}":
            depth -= 1
    if brace is None:
        segs = [s.strip() for s in tree.split(" as ")[0].split("::") if s.strip()]
        yield prefix + tuple(segs)
        return
    head = [s.strip() for s in tree[:brace].split("::") if s.strip()]
    inner = tree[brace + 1:tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    for p in parts:
        if p.strip():
            yield from use_paths(p, prefix + tuple(head))


def resolve(path: tuple, here: tuple, modules: set):
    """A path's target module, or None when it leaves the crate."""
    if not path:
        return None
    if path[0] == "crate":
        base = ()
        rest = path[1:]
    elif path[0] in ("super", "self"):
        base = here
        rest = path
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        return None
    full = base + tuple(s for s in rest if s != "self")
    for n in range(len(full), -1, -1):
        if full[:n] in modules:
            return full[:n]
    return ()


def graph():
    files = sorted(SRC.rglob("*.rs"))
    modules = {module_of(f) for f in files}
    edges = {}
    for f in files:
        here = module_of(f)
        text = strip_test_modules(strip_comments(f.read_text()))
        targets = set()
        for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", text, flags=re.S):
            for p in use_paths(m.group(1)):
                targets.add(resolve(p, here, modules))
        for m in re.finditer(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", text):
            targets.add(resolve(tuple(m.group(1).split("::")), here, modules))
        targets.discard(None)
        targets.discard(here)
        # A parent naming its own children: declaring and re-exporting them.
        targets = {t for t in targets if not (len(t) > len(here) and t[: len(here)] == here)}
        edges[here] = targets
    return modules, edges


def circles(modules, edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def allowed_table():
    """Per top-level module, the module paths it may import (None: everything), and the leaf
    modules every module may use (a row whose imports say "any module may use it")."""
    text = (ROOT / "docs" / "design.md").read_text()
    allowed, shared = {}, set()
    for line in text.splitlines():
        m = re.match(r"\|\s*`(\w+)/?`\s*\|[^|]*\|([^|]*)\|\s*$", line)
        if not m:
            continue
        name, imports = m.group(1), m.group(2)
        crate_part = imports.split(" / ")[0]
        if "any module may use" in imports:
            shared.add((name,))
        if "everything" in crate_part:
            allowed[name] = None
        else:
            # Only the names before any parenthesis: `spec::method` (the `Method` type).
            names = re.sub(r"\([^)]*\)", "", crate_part)
            allowed[name] = {tuple(n.split("::")) for n in re.findall(r"`([\w:]+)`", names)}
    return allowed, shared


def permitted(rule, shared, dst):
    if rule is None:
        return True
    return any(dst[: len(p)] == p for p in rule | shared)


def name(m):
    return "::".join(m) or "crate"


def main():
    modules, edges = graph()
    allowed, shared = allowed_table()
    show_edges = "--edges" in sys.argv[1:]
    arrows = 0
    forbidden = []
    for src in sorted(edges):
        for dst in sorted(edges[src]):
            arrows += 1
            if show_edges:
                print(f"{name(src)} -> {name(dst)}")
            if not src or not dst or src[0] == dst[0]:
                continue
            if not permitted(allowed.get(src[0], set()), shared, dst):
                forbidden.append((src, dst))
    loops = circles(modules, edges)
    missing = sorted({m[0] for m in modules if m} - set(allowed))
    print(f"{len(modules)} files, {arrows} arrows")
    print(f"circles: {len(loops)}")
    for c in loops:
        print("  " + " <-> ".join(name(m) for m in c))
    print(f"arrows against docs/design.md: {len(forbidden)}")
    for s, d in forbidden:
        print(f"  {name(s)} -> {name(d)}")
    if missing:
        print("top-level modules missing from the table: " + ", ".join(missing))
    return 1 if loops or forbidden or missing else 0


if __name__ == "__main__":
    sys.exit(main())
