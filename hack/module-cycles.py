#!/usr/bin/env python3
"""Checks the module layering of the crate (issue 24); exits 1 on any violation.

1. No circle inside any top-level module directory (`src/controller/`, `src/planner/`,
   `src/gates/`, ...): the file-level graph of `use super::...`, `crate::...` and
   child-module paths (in `use` items and in code, not in comments, not in
   `#[cfg(test)] mod tests` blocks or `*tests.rs` files) has no cycle, and no file is exempt.
   A file's edge to its own parent or child module does not count (see `graph`).
2. Layers: `src/cli` and `src/admission` import nothing of `crate::controller`;
   `src/api` and `src/planner` import nothing of `crate::controller` or `crate::cluster`
   (they are pure: the API types and the planner read plain data); `src/gates` (the
   budgets' gates, read by admission and the planner) imports none of those nor the
   planner or admission; `src/cluster` imports
   nothing of `crate::controller` (the controller's calls on the API are below it).

Usage: hack/module-cycles.py [REPO_ROOT]
"""

import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SRC = os.path.join(ROOT, "src")

# What each source tree may not name (a path prefix), and why.
FORBIDDEN = [
    ("cli", ["crate::controller"], "the CLI reads the planner and the API, not the controller"),
    ("admission", ["crate::controller"], "the webhook does not depend on the controller"),
    ("api", ["crate::controller", "crate::cluster"], "API types and parsers are pure"),
    ("planner", ["crate::controller", "crate::cluster"], "the planner is pure"),
    (
        "gates",
        ["crate::controller", "crate::cluster", "crate::planner", "crate::admission"],
        "the gates parse and evaluate API fields for admission and the planner alike",
    ),
    ("cluster", ["crate::controller"], "cluster access (reads, single API calls, the Lease) sits below the controller"),
]

PATH = re.compile(r"\b(?:(?:super|self|crate)(?:::\w+)+)")


def code_of(path):
    """The file's text without comments and without its `#[cfg(test)]` tests module."""
    text = open(path, encoding="utf-8").read()
    test_mod = re.search(r"#\[cfg\(test\)\]\s*mod\s+tests\s*\{", text)
    if test_mod:
        text = text[: test_mod.start()]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # Line comments (doc comments too); strings holding `//` only lose the rest of their line.
    return "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())


def expand(tree):
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\w+$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p for part in parts if part for p in expand(prefix + part)]


def paths_in(code):
    """Every path the code names: those of `use` items (expanded), then inline ones."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        paths.extend(expand(m.group(1)))
    rest = re.sub(r"\buse\s+[^;]+;", "", code)
    paths.extend(PATH.findall(rest))
    return paths


def module_of(rel):
    """`controller/evacuate/mod.rs` -> ("controller", "evacuate"); `x.rs` -> ("x",)."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def rust_files(top):
    for dirpath, _, names in os.walk(top):
        for name in sorted(names):
            if name.endswith(".rs"):
                yield os.path.join(dirpath, name)


def trees():
    """The crate's top-level modules that are directories: each is checked for circles."""
    return sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))


def graph(tree):
    """The file-level graph of one tree: module -> the sibling or cousin modules it names.

    A module's edge to its own parent or child is not counted: a parent declares its children
    (and may re-export them) and a child may name what its parent defines, which is how Rust
    lays out one concept over several files, not a circle between two concepts."""
    files = {}
    for path in rust_files(os.path.join(SRC, tree)):
        rel = os.path.relpath(path, SRC)
        if os.path.basename(rel).endswith("tests.rs"):
            continue
        files[module_of(rel)] = rel
    if os.path.isfile(os.path.join(SRC, tree + ".rs")):
        files[(tree,)] = tree + ".rs"
    edges = {}
    for module, rel in files.items():
        targets = set()
        for p in paths_in(code_of(os.path.join(SRC, rel))):
            segs = p.split("::")
            if segs[0] == "crate":
                resolved = segs[1:]
            elif segs[0] in ("super", "self"):
                base = list(module)
                while segs and segs[0] in ("super", "self"):
                    if segs.pop(0) == "super":
                        base.pop()
                resolved = base + segs
            elif module + (segs[0],) in files:  # a child module named bare (`use decide::X`)
                resolved = list(module) + segs
            else:
                continue
            # The longest prefix that is a file of ours.
            for n in range(len(resolved), 0, -1):
                target = tuple(resolved[:n])
                if target in files:
                    related = target[: len(module)] == module or module[: len(target)] == target
                    if target != module and not (related and abs(len(target) - len(module)) == 1):
                        targets.add(target)
                    break
        edges[module] = targets
    return files, edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(module):
    return "::".join(module)


def main():
    failures, checked = 0, 0
    for tree in trees():
        files, edges = graph(tree)
        checked += len(files)
        for comp in cycles(edges):
            failures += 1
            members = set(comp)
            print(f"cycle among {len(comp)} modules of src/{tree}:")
            for m in comp:
                inside = sorted(name(t) for t in edges[m] if t in members)
                print(f"  {files[m]} -> {', '.join(inside)}")
    for tree, prefixes, why in FORBIDDEN:
        top = os.path.join(SRC, tree)
        candidates = list(rust_files(top)) if os.path.isdir(top) else []
        if os.path.isfile(top + ".rs"):
            candidates.append(top + ".rs")
        for path in candidates:
            named = sorted({p for p in paths_in(code_of(path)) for f in prefixes if p == f or p.startswith(f + "::")})
            if named:
                failures += 1
                print(f"{os.path.relpath(path, ROOT)} ({why}) names: {', '.join(named)}")
    if failures:
        print(f"module-cycles: {failures} violation(s)")
        return 1
    print(f"module-cycles: {checked} modules in {len(trees())} trees, no cycle; layers respected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
