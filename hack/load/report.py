#!/usr/bin/env python3
"""Summarises a hack/load.sh run: ratios to the baseline, then ratios to the kube-rs floor
round by round (each webhook run against the floor run of the same round, seconds apart),
absolute figures, the targets of docs/benchmarks.md and the webhook's memory.

Usage: report.py RESULT_DIR (a directory hack/load.sh wrote), or report.py --line WRK_JSON."""

import json
import statistics
import sys
from pathlib import Path

if sys.argv[1] == "--line":
    # One wrk result line, as the run goes.
    w = json.loads(sys.argv[2])
    print(f"{w['requests'] * 1e6 / w['duration_us']:9.0f} req/s  p50 {w['p50_us']} us  p99 {w['p99_us']} us")
    sys.exit(0)

out = Path(sys.argv[1])
rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
rss = json.loads((out / "rss.json").read_text())


def figures(r):
    w = r["wrk"]
    secs = w["duration_us"] / 1e6
    cpu_s = r["cpu_ticks"] / r["clk_tck"]
    return {
        "rps": w["requests"] / secs,
        "p50": w["p50_us"],
        "p99": w["p99_us"],
        "p999": w["p999_us"],
        "cpu_us": cpu_s * 1e6 / max(w["requests"], 1),
        "cpu_cores": cpu_s / secs,
        "errors": w["connect_errors"] + w["read_errors"] + w["write_errors"] + w["timeouts"] + w["non2xx"],
        "rss": r["rss_max_kib"],
        "threads": r["threads"],
    }


# Median round (by throughput) per scenario and connection count.
groups = {}
for r in rows:
    groups.setdefault((r["scenario"], r["connections"]), []).append(figures(r))
med = {}
for key, runs in groups.items():
    runs.sort(key=lambda f: f["rps"])
    med[key] = runs[(len(runs) - 1) // 2]
scenarios = [s for s in ["baseline", "floor", "validate", "mutate", "denied"] if any(k[0] == s for k in med)]
# Per round: (scenario, connections) -> figures, for ratios within one round.
by_round = {}
for r in rows:
    by_round.setdefault(r["round"], {})[(r["scenario"], r["connections"])] = figures(r)
conns = sorted({k[1] for k in med})
rounds = max(len(v) for v in groups.values())


def us(v):
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


print()
print(f"Ratio to the bare axum + tokio-rustls baseline, same run (median of {rounds} round(s));")
print("throughput: higher is better (target >= 0.80 at 64 connections); latency: lower is better")
head = f"{'':22}" + "".join(f"{'c=' + str(c):>12}" for c in conns)
print(head)
for s in scenarios:
    if s == "baseline":
        continue
    for metric, label in [("rps", "throughput"), ("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("cpu_us", "CPU/request")]:
        cells = []
        for c in conns:
            b, x = med.get(("baseline", c)), med.get((s, c))
            cells.append(f"{x[metric] / b[metric]:.2f}x" if b and x and b[metric] else "-")
        print(f"{s + ' ' + label:22}" + "".join(f"{v:>12}" for v in cells))


def floor_ratios(s, c, metric):
    """The ratio of scenario s to the floor in each round that ran both at c connections."""
    return [
        got[(s, c)][metric] / got[("floor", c)][metric]
        for got in by_round.values()
        if (s, c) in got and ("floor", c) in got and got[("floor", c)][metric]
    ]


if "floor" in scenarios:
    print()
    print("Ratio to the kube-rs floor (kube-core typed decode, allowed: true, encode), round by round;")
    print("median [lowest-highest] of the per-round ratios; throughput: higher is better (goal >= 1.00)")
    print(f"{'':22}" + "".join(f"{'c=' + str(c):>20}" for c in conns))
    for s in [s for s in scenarios if s not in ("baseline", "floor")]:
        for metric, label in [("rps", "throughput"), ("p50", "p50"), ("p99", "p99"), ("cpu_us", "CPU/request")]:
            cells = []
            for c in conns:
                r = sorted(floor_ratios(s, c, metric))
                cells.append(f"{statistics.median(r):.2f}x [{r[0]:.2f}-{r[-1]:.2f}]" if r else "-")
            print(f"{s + ' ' + label:22}" + "".join(f"{v:>20}" for v in cells))
print()
print("Absolute figures (wrk: keep-alive HTTPS, 2 threads, 1 at c=1; server CPU from /proc/PID/stat)")
print(f"{'scenario':10}{'c':>4}{'req/s':>10}{'p50':>10}{'p99':>10}{'p99.9':>10}{'CPU/req':>10}{'cores':>7}{'errors':>8}")
for s in scenarios:
    for c in conns:
        f = med.get((s, c))
        if f:
            print(
                f"{s:10}{c:>4}{f['rps']:>10.0f}{us(f['p50']):>10}{us(f['p99']):>10}{us(f['p999']):>10}"
                f"{f['cpu_us']:>8.1f}us{f['cpu_cores']:>7.2f}{f['errors']:>8}"
            )
print()
print("Targets")
top, low = max(conns), min(conns)
for s in [s for s in ("validate", "mutate") if s in scenarios]:
    b, x = med.get(("baseline", top)), med.get((s, top))
    if b and x:
        ratio = x["rps"] / b["rps"]
        print(f"  {s} throughput at c={top}: {ratio:.2f}x baseline (target >= 0.80): {'met' if ratio >= 0.8 else 'SHORT'}")
for s in [s for s in ("validate", "mutate", "denied") if s in scenarios]:
    x = med.get((s, top))
    if x:
        print(f"  {s} p99 at c={top}: {us(x['p99'])} (target <= 10 ms): {'met' if x['p99'] <= 10000 else 'SHORT'}")
    x = med.get((s, low))
    if x:
        print(f"  {s} p50 at c={low}: {us(x['p50'])} (target <= 100 us): {'met' if x['p50'] <= 100 else 'SHORT'}")
for s in [s for s in ("validate", "mutate") if s in scenarios and "floor" in scenarios]:
    r = floor_ratios(s, top, "rps")
    if r:
        ratio = statistics.median(r)
        print(
            f"  {s} throughput at c={top}: {ratio:.2f}x the floor, median of {len(r)} rounds "
            f"(goal >= 1.00): {'met' if ratio >= 1.0 else 'SHORT'}"
        )
    r = floor_ratios(s, top, "p99")
    if r:
        ratio = statistics.median(r)
        print(
            f"  {s} p99 at c={top}: {ratio:.2f}x the floor's, median of {len(r)} rounds "
            f"(goal <= 1.00): {'met' if ratio <= 1.0 else 'SHORT'}"
        )
print()
server_max = max((f["rss"] for (s, _), f in med.items() if s not in ("baseline", "floor")), default=0)
print(
    f"Webhook RSS: {rss['rss_idle_kib'] / 1024:.1f} MiB idle, {server_max / 1024:.1f} MiB max sampled under load, "
    f"{rss['rss_hwm_kib'] / 1024:.1f} MiB peak (VmHWM); baseline {rss['baseline_rss_idle_kib'] / 1024:.1f} MiB idle, "
    f"{rss['baseline_rss_hwm_kib'] / 1024:.1f} MiB peak"
)
errors = sum(f["errors"] for f in med.values())
if errors:
    print(f"WARNING: {errors} socket errors, timeouts or non-2xx answers in the reported runs")
