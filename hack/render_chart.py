"""Renders charts/node-maintenance offline (helm-python-sdk, no helm binary, no cluster) as
one multi-document YAML stream, like `helm template --include-crds`. Run by
hack/render-chart.sh inside the chart virtualenv (hack/chart-venv.sh).

    render_chart.py OUTFILE [--release nm] [--namespace NS] [--skip-crds]
                    [-f values.yaml]... [--set k.k=v]... [--set-string k.k=v]...

`--set` follows helm for the common cases: dotted keys make nested maps, `true`, `false`,
`null` and integers are typed, everything else is a string; the value is everything after
the first `=` (base64 may end in `=`). Unlike helm, commas do not separate assignments
(repeat `--set`). Rendering goes through tests/chart/conftest.py's `_render`, the same call
the chart tests make. OUTFILE `-` writes to stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "chart"))

import helm_python as helm  # noqa: E402
from conftest import CHART, RELEASE, _render  # noqa: E402

DEFAULT_NAMESPACE = "node-maintenance"


def typed(text: str) -> Any:
    """A --set value as helm types it."""
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if re.fullmatch(r"-?(0|[1-9][0-9]*)", text):
        return int(text)
    return text


def assign(values: dict[str, Any], assignment: str, as_string: bool) -> None:
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise SystemExit(f"render_chart: --set expects key=value, got {assignment!r}")
    parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", key)]
    node = values
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = raw if as_string else typed(raw)


def merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for k, v in other.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v


def render(values: dict[str, Any], release: str, namespace: str, include_crds: bool) -> str:
    docs: list[str] = []
    if include_crds:
        for crd in sorted((CHART / "crds").glob("*.y*ml")):
            docs.append(f"# Source: {CHART.name}/crds/{crd.name}\n{crd.read_text().strip()}\n")
    with helm.Chart.load(str(CHART)) as chart:
        manifests, _ = _render(chart, json.dumps(values, sort_keys=True), release, namespace)
    for path, text in sorted(manifests.items()):
        if not path.endswith((".yaml", ".yml")):
            continue  # NOTES.txt
        for doc in re.split(r"(?m)^---[ \t]*$", text):
            if yaml.safe_load(doc) is None:
                continue  # a disabled template renders to comments or nothing
            docs.append(f"# Source: {path}\n{doc.strip()}\n")
    return "".join(f"---\n{d}" for d in docs)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outfile", help="where to write the manifests (- for stdout)")
    p.add_argument("--release", default=RELEASE, help=f"release name (default {RELEASE})")
    p.add_argument("--namespace", "-n", default=DEFAULT_NAMESPACE, help=f"release namespace (default {DEFAULT_NAMESPACE})")
    p.add_argument("--skip-crds", action="store_true", help="leave out crds/ (included by default)")
    p.add_argument("--values", "-f", action="append", default=[], help="a values file (repeatable)")
    p.add_argument("--set", action="append", default=[], dest="sets", help="key=value (repeatable)")
    p.add_argument("--set-string", action="append", default=[], dest="set_strings", help="key=value kept a string")
    args = p.parse_args(argv)
    values: dict[str, Any] = {}
    for f in args.values:
        merge(values, yaml.safe_load(Path(f).read_text()) or {})
    for s in args.sets:
        assign(values, s, as_string=False)
    for s in args.set_strings:
        assign(values, s, as_string=True)
    out = render(values, args.release, args.namespace, not args.skip_crds)
    if args.outfile == "-":
        sys.stdout.write(out)
    else:
        Path(args.outfile).write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
