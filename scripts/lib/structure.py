#!/usr/bin/env python3
"""structure.py: the two structure rules of the runtime (issue #30), measured from the text.

  imports  the file-level import graph of app/runtime/src: every `crate::`, `super::` and
           `self::` path in code (a `use`, a path in a signature or a body; `{a, b}` groups
           expand), test items left out, each resolved through `pub use` re-exports to the
           file that defines the name; a folder's mod.rs depends on the children it declares.
           Prints every circle (strongly connected component of more than one file).
  fns      every non-test function in app/ longer than the limit (lines from `fn` to its
           closing brace; comments, doc comments and strings blanked first).

Usage: scripts/lib/structure.py [imports|fns|all] [--limit 150] [--graph]
Exit status 1 when a rule is broken (a circle, a function over the limit).
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def strip(src):
    """Blanks comments, strings and char literals; keeps newlines (line numbers hold)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if src.startswith("/*", i):
            d, j = 0, i
            while j < n:
                if src.startswith("/*", j):
                    d, j = d + 1, j + 2
                elif src.startswith("*/", j):
                    d, j = d - 1, j + 2
                else:
                    j += 1
                if d == 0:
                    break
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        m = re.match(r'b?r(#*)"', src[i : i + 10])
        if m and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            h = m.group(1)
            e = src.find('"' + h, i + len(m.group(0)))
            out.append(re.sub(r"[^\n]", " ", src[i : e + 1 + len(h)]))
            i = e + 1 + len(h)
            continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", src[i + 1 : j]) + '"')
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i : i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def match_brace(t, i):
    d = 0
    for j in range(i, len(t)):
        if t[j] == "{":
            d += 1
        elif t[j] == "}":
            d -= 1
            if d == 0:
                return j
    return len(t) - 1


def test_ranges(s):
    r = []
    for m in re.finditer(r"#\[cfg\(test\)\]", s):
        j = m.end()
        while j < len(s) and s[j] not in "{;":
            j += 1
        if j < len(s):
            r.append((m.start(), j if s[j] == ";" else match_brace(s, j)))
    return r


def blank(s, ranges):
    for a, b in ranges:
        s = s[:a] + re.sub(r"[^\n]", " ", s[a : b + 1]) + s[b + 1 :]
    return s


# --- imports -----------------------------------------------------------------------------

SRC = os.path.join(ROOT, "app", "runtime", "src")


def modules():
    """Module path (tuple) -> file, for every file of the crate (tests.rs files left out)."""
    mods = {}
    for d, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            rel = os.path.relpath(os.path.join(d, f), SRC)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            mods[tuple(rel)] = os.path.join(d, f)
    return mods


def expand(path):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (a path as written after the root)."""
    m = re.search(r"\{", path)
    if not m:
        return [path]
    head, body = path[: m.start()], path[m.start() + 1 : match_brace(path, m.start())]
    parts, d, cur = [], 0, ""
    for ch in body:
        if ch == "," and d == 0:
            parts.append(cur)
            cur = ""
            continue
        d += ch == "{"
        d -= ch == "}"
        cur += ch
    parts.append(cur)
    return [q for p in parts if p.strip() for q in expand(head + p.strip())]


def paths(text):
    """Every path starting at crate::, super:: or self:: (groups expanded)."""
    out = []
    for m in re.finditer(r"\b(crate|super|self)::", text):
        i, d = m.end(), 0
        while i < len(text):
            ch = text[i]
            if ch == "{":
                d += 1
            elif ch == "}":
                if d == 0:
                    break
                d -= 1
            elif d == 0 and not (ch.isalnum() or ch in "_:"):
                break
            i += 1
        raw = re.sub(r"\s+", "", text[m.start() : i])
        out += [p for p in expand(raw)]
    return out


def graph():
    mods = modules()
    texts = {}
    for mod, f in mods.items():
        t = strip(open(f).read())
        texts[mod] = blank(t, test_ranges(t))
    # re-exports: (module, name) -> the path it re-exports (absolute segments)
    reexp = {}
    for mod, t in texts.items():
        for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", t):
            for p in expand(re.sub(r"\s+", "", m.group(2))):
                p = re.sub(r"\s+as\s+\w+$", "", p)
                segs = absolute(mod, p.split("::"), mods)
                if segs:
                    name = p.split("::")[-1].split("as")[-1]
                    reexp[(mod, name)] = segs
    edges = {mod: set() for mod in mods}
    for mod, t in texts.items():
        for m in re.finditer(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", t, re.M):
            child = mod + (m.group(3),)
            if child in mods:
                edges[mod].add(child)
        for p in paths(t):
            segs = absolute(mod, p.split("::"), mods)
            target = resolve(segs, mods, reexp) if segs else None
            if target and target != mod and not is_ancestor_decl(target, mod):
                edges[mod].add(target)
    return mods, edges


def is_ancestor_decl(target, mod):
    return False


def absolute(mod, segs, mods):
    """Segments of a path written in `mod`, from the crate root."""
    if not segs or segs == [""]:
        return None
    if segs[0] == "crate":
        return segs[1:]
    here = list(mod)
    # `self::` / `super::` are relative to the module; a file `a/b.rs` is module a::b.
    while segs and segs[0] in ("self", "super"):
        if segs[0] == "super":
            here = here[:-1]
        segs = segs[1:]
    return here + segs


def resolve(segs, mods, reexp, depth=0):
    """The file that defines the item at `segs` (longest module prefix, re-exports followed)."""
    segs = [s for s in segs if s and s != "*"]
    for k in range(len(segs), -1, -1):
        mod = tuple(segs[:k])
        if mod in mods:
            if k < len(segs) and (mod, segs[k]) in reexp and depth < 8:
                return resolve(reexp[(mod, segs[k])] + segs[k + 1 :], mods, reexp, depth + 1)
            return mod
    return None


def sccs(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "/".join(mod) if mod else "lib"


def imports(show_graph):
    mods, edges = graph()
    if show_graph:
        for v in sorted(edges):
            print(f"{name(v)} -> {', '.join(name(w) for w in sorted(edges[v])) or '-'}")
    bad = [sorted(c) for c in sccs(edges) if len(c) > 1]
    for c in bad:
        print(f"import circle of {len(c)} files in app/runtime/src: {', '.join(name(m) for m in c)}")
    if not bad:
        print(f"app/runtime/src: {len(mods)} files, no import circle")
    return not bad


# --- function lengths --------------------------------------------------------------------


def fns(limit):
    long = []
    for d, _, files in os.walk(os.path.join(ROOT, "app")):
        for f in files:
            path = os.path.join(d, f)
            rel = os.path.relpath(path, ROOT)
            parts = rel.split(os.sep)
            if not f.endswith(".rs") or "tests" in parts or "benches" in parts or f == "tests.rs":
                continue
            t = strip(open(path).read())
            tests = test_ranges(t)
            for m in re.finditer(r"\bfn\s+(\w+)", t):
                if any(a <= m.start() <= b for a, b in tests):
                    continue
                j = m.end()
                while j < len(t) and t[j] not in "{;":
                    j += 1
                if j >= len(t) or t[j] == ";":
                    continue
                end = match_brace(t, j)
                lines = t.count("\n", m.start(), end) + 1
                if lines > limit:
                    long.append((lines, rel, m.group(1), t.count("\n", 0, m.start()) + 1))
    for lines, rel, fn, line in sorted(long, reverse=True):
        print(f"function over {limit} lines: {rel}:{line} {fn} ({lines} lines)")
    if not long:
        print(f"app/: no non-test function over {limit} lines")
    return not long


def main():
    args = sys.argv[1:]
    what = args[0] if args and not args[0].startswith("-") else "all"
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 150
    ok = True
    if what in ("imports", "all"):
        ok &= imports("--graph" in args)
    if what in ("fns", "all"):
        ok &= fns(limit)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
