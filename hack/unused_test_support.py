"""Reads cargo's JSON messages on stdin (a build of every target with cfg nm_unused_support)
and prints the tests/support items that every target compiling them reports unused; exits 1
when there are any. Called by hack/unused-test-support.sh."""
import collections, json, os, sys
seen = collections.defaultdict(set)  # (file, line, text) -> targets reporting it unused
errors = 0
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-message":
        continue
    msg = m["message"]
    if msg.get("level") == "error":  # a failed build: show why (the script exits with cargo's code)
        print(msg.get("rendered") or msg.get("message"), file=sys.stderr)
        errors += 1
        continue
    if (msg.get("code") or {}).get("code") != "dead_code":
        continue
    for sp in msg["spans"]:
        f = os.path.normpath(sp["file_name"])
        if "tests/support/" in f:
            text = sp["text"][0]["text"].strip() if sp["text"] else ""
            seen[(f, sp["line_start"], text)].add(m["target"]["name"])
# Which targets compile what: `mod support;` in a test compiles the whole tree; a bench
# compiles the support modules it includes through #[path = "../tests/support/DIR/mod.rs"].
import re
tests = {f[:-3] for f in os.listdir("tests") if f.endswith(".rs") and "\nmod support;" in open(os.path.join("tests", f)).read()}
benches = {}
for f in os.listdir("benches"):
    if f.endswith(".rs"):
        dirs = re.findall(r"#\[path = \"\.\./tests/support/([^/\"]+)/", open(os.path.join("benches", f)).read())
        benches[f[:-3]] = set(dirs)
def including(path):
    top = path.split("tests/support/")[1].split("/")[0]
    return tests | {b for b, dirs in benches.items() if top in dirs}
found = 0
for (f, line, text), ts in sorted(seen.items()):
    # Group headers ("impl X {", a type whose variants are reported) are not items.
    if ts >= including(f) and not text.startswith(("impl ", "pub enum ", "enum ")):
        print(f"{f}:{line}: {text}")
        found += 1
if errors:  # a target that did not build reports nothing unused: no count to trust
    sys.exit(2)
print(f"{found} unused test-support items", file=sys.stderr)
sys.exit(1 if found else 0)
