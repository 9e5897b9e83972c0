#!/usr/bin/env python3
"""The "house" of a source tree: how its code is laid out, in numbers a change can move.

    python3 scripts/house-metrics.py [TREE]          # Markdown table, then the details
    python3 scripts/house-metrics.py [TREE] --json   # the numbers only

TREE defaults to the repository this script is in; any checkout works (a `git worktree` of an
older commit, say). Files are the `*.rs` files of TREE/src (and TREE/tests for the line count).
"Non-test code" leaves out files named tests.rs or under a tests/ folder, and every item
carrying `#[cfg(test)]` (a test module, or a single fn), from the attribute to the item's
closing brace or semicolon. Comments are never read; string literals are read as written
(escapes not decoded).

  circles, design arrows  TREE's own scripts/import-graph.py, run in this process with its
                          ROOT at TREE (this repository's copy when TREE has none or its summary
                          cannot be read): file-level import circles, and arrows between
                          top-level modules that docs/design.md's module table does not allow.
  tools two-way           for every module under src/tools with child modules (tools/mod.rs,
                          tools/paging/mod.rs, tools/select.rs, ...): the children (not tests.rs)
                          that import their parent (import-graph's arrow child -> parent, e.g.
                          `use super::Code`), the children the parent uses, and the children
                          that do both. The parent uses a child when its non-test code names a
                          path `child::…`, `self::child::…` or `crate::<parent>::child::…`
                          outside `mod child;` lines and `pub use`/`pub(…) use` statements (a
                          re-export, then used by its bare name, does not count).
  files over 600 lines    `*.rs` files of src/ with more than 600 lines (lines as `wc -l`
                          counts them, plus an unterminated last line); lines of src/ and tests/
                          are all their `*.rs` lines, tests included.
  largest fns             every `fn NAME` item with a body in non-test code of src/ (methods and
                          nested fns included, closures not), from the line of `fn` to the line
                          of its closing brace by brace matching; attributes and doc comments
                          above it are not counted. Top 10, and how many have over 100 lines.
  code strings            string literals in non-test src/ code that are exactly a stable error
                          code, outside the files that define the codes: src/types/code.rs, or
                          where there is none src/tools/error.rs and src/http/error.rs. The
                          codes: the SCREAMING_SNAKE literals of those files (in TREE and in
                          this repository), the unit variants of their `enum Code` and `enum
                          ErrorCode` in SCREAMING_SNAKE, and RELOAD_FAILED, RATE_LIMITED,
                          FORBIDDEN.
  tool strings            literals "apigate.discover", "apigate.schema", "apigate.execute" and
                          the call `strip_prefix("api_")` in non-test src/ code outside
                          src/types/tool.rs.
  source strings          literals exactly "server", "session", "oauth", "assertion", or
                          starting "scheme:", in non-test code of src/upstream/, src/auth/ and
                          src/tools/credentials.rs, outside src/types/credential.rs, where the
                          line mentions "source" or calls set_header/set_query/sends_from, or
                          the enclosing fn's name says "source" or "credential" (each hit says
                          which). The number in brackets: the line alone mentions "source".
  copy-paste pairs        the first line of `duplicates --repo src` and `--repo tests`, run at
                          TREE (defaults: runs of 6 lines, identical or of the same shape).
"""
import bisect
import contextlib
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
NEW_CODE_FILES, OLD_CODE_FILES = ("src/types/code.rs",), ("src/tools/error.rs", "src/http/error.rs")
KNOWN_CODES = {"RELOAD_FAILED", "RATE_LIMITED", "FORBIDDEN"}
FEATURES = {"apigate.discover", "apigate.schema", "apigate.execute"}
SOURCES = {"server", "session", "oauth", "assertion"}
RAW_START = re.compile(r'(?<!\w)[bc]?r(#*)"')


def mask(text, spans):
    """`text` with the characters of `spans` (start, end) turned to spaces, newlines kept."""
    chars = list(text)
    for a, b in spans:
        for k in range(a, b):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)


def lex(text):
    """Comment spans, string/char literal content spans, and literals (offset, content)."""
    comments, contents, literals = [], [], []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append((i, j))
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                step = text[j:j + 2]
                depth += {"/*": 1, "*/": -1}.get(step, 0)
                j += 2 if step in ("/*", "*/") else 1
            comments.append((i, j))
        elif m := RAW_START.match(text, i):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j
            contents.append((m.end(), j))
            literals.append((i, text[m.end():j]))
            j += len(close)
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            contents.append((i + 1, j))
            literals.append((i, text[i + 1:j]))
            j += 1
        elif text[i] == "'" and (text.startswith("\\", i + 1) or text[i + 2:i + 3] == "'"):
            j = text.find("'", i + 3) if text[i + 1] == "\\" else i + 2
            j = n if j < 0 else j
            contents.append((i + 1, j))
            j += 1
        else:  # code, or a lifetime's quote
            j = i + 1
        i = j
    return comments, contents, literals


def close_of(blank, k):
    """Given blank[k] == '{', the offset just after its matching '}'."""
    depth = 0
    for j in range(k, len(blank)):
        depth += {"{": 1, "}": -1}.get(blank[j], 0)
        if depth == 0:
            return j + 1
    return len(blank)


def item_end(blank, k):
    """The end of the item whose header starts at k: after its body's '}', or after its ';'."""
    depth = 0
    for j in range(k, len(blank)):
        ch = blank[j]
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if depth == 0 and ch == ";":
            return j + 1, False
        if depth == 0 and ch == "{":
            return close_of(blank, j), True
    return len(blank), False


class RustFile:
    def __init__(self, tree, path):
        self.rel = path.relative_to(tree).as_posix()
        text = path.read_text(errors="replace")
        self.nlines = len(text.splitlines())
        self.newlines = [k for k, ch in enumerate(text) if ch == "\n"]
        comments, contents, literals = lex(text)
        self.code = mask(text, comments)  # strings kept
        blank = mask(self.code, contents)  # strings and char literals emptied too
        tests = []
        for m in re.finditer(r"#\[cfg\(test\)\]", blank):
            start = re.compile(r"(?:\s*#\[[^\]]*\])*\s*").match(blank, m.end()).end()
            tests.append((m.start(), item_end(blank, start)[0]))
        parts = Path(self.rel).parts
        self.test_file = path.name == "tests.rs" or "tests" in parts[1:-1]
        if self.test_file:
            tests = [(0, len(text))]
        self.test_lines = {ln for a, b in tests for ln in range(self.line(a), self.line(b) + 1)}
        self.live = mask(self.code, tests)
        self.literals = [(self.line(k), s) for k, s in literals]
        self.literals = [(ln, s) for ln, s in self.literals if ln not in self.test_lines]
        self.fns = []  # (line, name, lines) of non-test fns with a body
        for m in re.finditer(r"\bfn\s+(\w+)", mask(blank, tests)):
            end, body = item_end(blank, m.end())
            if body:
                first, last = self.line(m.start()), self.line(end - 1)
                self.fns.append((first, m.group(1), last - first + 1))

    def line(self, offset):
        return bisect.bisect_left(self.newlines, offset) + 1

    def fn_at(self, line):
        inside = [f for f in self.fns if f[0] <= line < f[0] + f[2]]
        return max(inside)[1] if inside else ""


def import_graph(tree):
    """(module, summary): TREE's import-graph.py (this repository's if TREE's cannot be read)."""
    for script in (tree / "scripts" / "import-graph.py", HERE / "scripts" / "import-graph.py"):
        if not script.exists():
            continue
        sys.dont_write_bytecode = True  # no __pycache__ left in TREE
        spec = importlib.util.spec_from_file_location(f"import_graph_{id(script)}", script)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.ROOT, mod.SRC = tree, tree / "src"
        out, argv = io.StringIO(), sys.argv
        try:
            sys.argv = [str(script)]
            with contextlib.redirect_stdout(out):
                mod.main()
        finally:
            sys.argv = argv
        summary, cur = {"script": str(script), "missing": ""}, None
        for line in out.getvalue().splitlines():
            if m := re.match(r"(circles|arrows against docs/design\.md): (\d+)$", line):
                cur = "circles" if m.group(1) == "circles" else "arrows"
                summary[cur] = (int(m.group(2)), [])
            elif line.startswith("  ") and cur:
                summary[cur][1].append(line.strip())
            elif line.startswith("top-level modules missing"):
                summary["missing"] = line.split(": ", 1)[1]
        if "circles" in summary and "arrows" in summary:
            return mod, summary
    raise SystemExit("no import-graph.py whose summary could be read")


def two_way(tree, mod, files):
    """Per parent module under tools/: (children importing it, children it uses, both)."""
    modules, edges = mod.graph()
    out = {}
    for parent in sorted(m for m in modules if m[:1] == ("tools",)):
        kids = sorted(m[-1] for m in modules if m[:-1] == parent and m and m[-1] != "tests")
        if not kids:
            continue
        base = "src/" + "/".join(parent)
        pfile = files.get(base + "/mod.rs") or files[base + ".rs"]
        text = re.sub(r"\bpub(?:\([^)]*\))?\s+use\b[^;]*;", " ", pfile.live)
        text = re.sub(r"\b(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;", " ", text)
        up = {k for k in kids if parent in edges.get(parent + (k,), ())}
        ok_prefix = {"", "self::", "crate::" + "::".join(parent) + "::"}
        down = set()
        for k in kids:
            for m in re.finditer(rf"(?<!\w){k}::", text):
                before = text[max(0, m.start() - 120):m.start()]
                if re.search(r"[\w:]*$", before).group() in ok_prefix:
                    down.add(k)
        out["::".join(parent)] = (sorted(up), sorted(down), sorted(up & down))
    return out


def duplicates(tree, folder):
    if not (tree / folder).is_dir():
        return "no folder"
    run = subprocess.run(["duplicates", "--repo", folder, "--most", "1"], cwd=tree,
                         capture_output=True, text=True)
    lines = run.stdout.splitlines()
    first = lines[0] if lines else run.stderr.strip()
    m = re.match(r"(\d+) pairs of places", first)
    shape = re.search(r"\((\d+) by shape alone, (\d+) of those marked boilerplate", first)
    if m and shape:
        text = f"{m.group(1)} ({shape.group(1)} by shape, {shape.group(2)} boilerplate)"
    else:
        text = m.group(1) if m else ("0" if first.startswith("no duplicates") else first)
    return text + "".join(f"; {x}" for x in lines if x.startswith("incomplete:"))


def code_files(root):
    """The files that define the codes: src/types/code.rs, or before it the two error.rs."""
    return NEW_CODE_FILES if (root / NEW_CODE_FILES[0]).exists() else OLD_CODE_FILES


def code_names(tree, files):
    names = set(KNOWN_CODES)
    for root in {tree, HERE}:
        for rel in code_files(root):
            path = root / rel
            if not path.exists():
                continue
            f = files.get(rel) if root == tree else RustFile(root, path)
            names |= {s for _, s in f.literals if re.fullmatch(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*", s)}
            for body in re.findall(r"\benum\s+(?:Code|ErrorCode)\s*\{([^}]*)\}", f.code):
                body = re.sub(r"#\[[^\]]*\]", "", body)
                for v in re.findall(r"(?:^|,)\s*([A-Z]\w*)\s*(?=,|$)", body.strip()):
                    names.add(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", v).upper())
    return names


def measure(tree):
    files = {f.rel: f for f in (RustFile(tree, p) for p in sorted((tree / "src").rglob("*.rs")))}
    tests_rs = sorted((tree / "tests").rglob("*.rs")) if (tree / "tests").is_dir() else []
    live = [f for f in files.values() if not f.test_file]
    mod, graph = import_graph(tree)
    pairs = two_way(tree, mod, files)
    top = pairs.get("tools", ([], [], []))

    big_files = sorted(((f.nlines, f.rel) for f in files.values() if f.nlines > 600), reverse=True)
    fns = sorted(((n, f.rel, ln, name) for f in live for ln, name, n in f.fns),
                 key=lambda x: (-x[0], x[1], x[2]))

    names = code_names(tree, files)
    code_hits = [f"{f.rel}:{ln} \"{s}\"" for f in live if f.rel not in code_files(tree)
                 for ln, s in f.literals if s in names]
    tool_hits = [f"{f.rel}:{ln} \"{s}\"" for f in live if f.rel != "src/types/tool.rs"
                 for ln, s in f.literals if s in FEATURES]
    tool_hits += [f"{f.rel}:{f.line(m.start())} strip_prefix(\"api_\")" for f in live
                  if f.rel != "src/types/tool.rs"
                  for m in re.finditer(r'strip_prefix\(\s*"api_"\s*\)', f.live)]

    source_hits, same_line = [], 0
    for f in live:
        scoped = f.rel.startswith(("src/upstream/", "src/auth/", "src/tools/credentials.rs"))
        if not scoped or f.rel == "src/types/credential.rs":
            continue
        lines = f.code.splitlines()
        for ln, s in f.literals:
            if s not in SOURCES and not s.startswith("scheme:"):
                continue
            line, fn = lines[ln - 1], f.fn_at(ln)
            if re.search(r"(?i)(?<!re)source", line):
                why, same_line = "line says source", same_line + 1
            elif m := re.search(r"\b(set_header|set_query|sends_from)\b", line):
                why = m.group(1)
            elif re.search(r"(?i)source|credential", fn):
                why = f"in fn {fn}"
            else:
                continue
            source_hits.append(f"{f.rel}:{ln} \"{s}\" ({why})")

    return {
        "tree": str(tree),
        "import circles": graph["circles"][0],
        "arrows against docs/design.md": graph["arrows"][0],
        "tools children importing tools": len(top[0]),
        "tools children tools uses": len(top[1]),
        "tools two-way pairs": len(top[2]),
        "two-way pairs under tools/ (all parents)": sum(len(v[2]) for v in pairs.values()),
        "src files over 600 lines": len(big_files),
        "src lines": sum(f.nlines for f in files.values()),
        "tests lines": sum(len(p.read_text(errors="replace").splitlines()) for p in tests_rs),
        "fns over 100 lines": sum(1 for x in fns if x[0] > 100),
        "largest fn lines": fns[0][0] if fns else 0,
        "code strings outside the code type": len(code_hits),
        "tool-feature strings outside Tool": len(tool_hits),
        "credential-source strings": f"{len(source_hits)} ({same_line})",
        "copy-paste pairs src": duplicates(tree, "src"),
        "copy-paste pairs tests": duplicates(tree, "tests"),
        "details": {
            "import-graph script": graph["script"],
            "circles": graph["circles"][1],
            "arrows against docs/design.md": graph["arrows"][1]
            + ([f"missing from the table: {graph['missing']}"] if graph["missing"] else []),
            "parents under tools/ (children importing it; children it uses; two-way)": [
                f"{p}: up {up or '-'}; down {down or '-'}; two-way {both or '-'}"
                for p, (up, down, both) in pairs.items()],
            "src files over 600 lines": [f"{rel} {n}" for n, rel in big_files],
            "largest fns": [f"{rel}:{ln} {name} {n}" for n, rel, ln, name in fns[:10]],
            "code names looked for": [" ".join(sorted(names))],
            "code strings outside the code type": code_hits,
            "tool-feature strings outside Tool": tool_hits,
            "credential-source strings": source_hits,
        },
    }


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    tree = Path(args[0]).resolve() if args else HERE
    result = measure(tree)
    if "--json" in sys.argv[1:]:
        print(json.dumps({k: v for k, v in result.items() if k != "details"}, indent=2))
        return
    print(f"House of {result['tree']}\n\n| metric | value |\n| --- | --- |")
    for key, value in result.items():
        if key not in ("tree", "details"):
            print(f"| {key} | {value} |")
    print("\n## details")
    for key, items in result["details"].items():
        if isinstance(items, str):
            print(f"\n{key}: {items}")
            continue
        print(f"\n{key}: {len(items) if items else 'none'}")
        for item in items:
            print(f"  {item}")


if __name__ == "__main__":
    main()
