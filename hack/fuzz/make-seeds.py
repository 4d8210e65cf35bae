#!/usr/bin/env python3
"""Writes the committed seed corpora (hack/fuzz/seeds/<target>/): the recorded AdmissionReviews
of tests/fixtures/apiserver (body only), and the literals of the parsers' unit tests. Run from
anywhere; it rewrites the text targets' seeds (the decide target's seeds are a minimized
corpus of a run, kept as they are). Layout of the inputs: hack/fuzz/src/input.rs."""

import hashlib
import json
import pathlib
import struct

FUZZ = pathlib.Path(__file__).resolve().parent
REPO = FUZZ.parent.parent
SEEDS = FUZZ / "seeds"
KNOBS = 16
SEP = b"\xff"


def write(target, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def knobs(*values):
    b = bytes(values)
    return b + bytes(KNOBS - len(b))


def texts(*parts):
    return SEP.join(p.encode() for p in parts)


def at_plain(seconds):
    return bytes([0]) + struct.pack("<I", seconds) + b"\0"


def at_transition(year, nth, delta):
    return bytes([1, year, nth]) + struct.pack("<h", delta) + b"\0"


def window_knobs(choice, duration, i):
    # One instant in 2026, one near a transition of the zone in 2026.
    at0 = at_plain(1_735_689_600 - 31_536_000 + i * 7_919_311 % 31_536_000)
    at1 = at_transition(26, i % 4, (i * 811) % 7200 - 3600)
    return bytes([choice, duration]) + at0 + at1 + b"\0\0"


DURATIONS = ["30m", "1h30m", "90s", "1.5h", "2h45m30s", "1500ms", "", "30", "30M", "2d", "1w", "1 h", "1h 30m",
             "-1h", "+1h", "1.h5", "ten minutes", "1h-30m", "99999999999999999999h", "0s", "0h0m", "8h", "10h",
             "1m", ".5h", "1.h", "0", "2562047h47m16.854775807s", "1µs"]
REQUESTERS = ["foo.example.com/bar", "acme.io/foo", "nodemaintenance.x-k8s.io/controller", "a.b/Under_score.1", "foo",
              "only/one/slash", "Example.com/abc", "example_com/abc", "/simple", "example.com/", "example.com/-dash",
              "k8s.io/key", "dev.kubernetes.io/key", "nodemaintenance.k8s.io/controller", "kubernetes.io/x",
              "a-b.c-d/x", "1.2.3/y"]
SCHEDULES = ["0 22 * * SAT", "30 2 * * *", "0,30 2 * * *", "*/15 * * * *", "0 * * * *", "0 1 * * *", "0 2 * * *",
             "0 22 * * 5,6", "0 12 * * *", "* * * * *", "0 0 L * *", "0 0 * *", "0 0 30 2 *", "0 0 29 2 *",
             "@daily", "0 0 ? * *", "0 0 1W * *", "0 0 * * 1#2", "0 0 */2 * MON", "0 0 1 JAN *", "5-10/2 1-3 * * 1-5",
             "0 0 1,15 * 0", "0 0 31 * *", "0 0 * * 7"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Mars/Olympus", "", "Etc/GMT+5", "../../etc/passwd",
         "/etc/localtime", "europe/berlin", "Australia/Lord_Howe", "EST5EDT", "Asia/Kolkata", "America/Santiago",
         "Antarctica/Troll", "Pacific/Apia", "right/UTC", "posixrules", "Europe/Berlin/"]
BLACKOUTS = [
    ["2026-12-20T00:00:00Z", "2027-01-04T00:00:00Z"],
    ["2026-12-18T00:00:00Z", "2027-01-04T00:00:00Z", "2027-03-01T00:00:00Z", "2027-03-02T00:00:00Z",
     "2026-12-24T00:00:00Z"],
    ["2026-12-20T00:00:00Z", "2026-12-20T00:00:00Z"],
    ["2026-12-20T00:00:00Z", "2026-12-21T00:00:00Z", "2026-12-20T12:00:00Z", "2026-12-23T00:00:00Z",
     "2026-12-20T06:00:00Z"],
    ["2026-12-20T01:00:00+01:00", "2026-12-20T00:00:00.5Z", "2026-12-20T00:00:00.25Z"],
    ["2026-12-20", "2026-12-20T00:00:00", "2026-12-20t00:00:00z"],
    ["-009999-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z"],
]
SELECTORS = [
    '{severity="critical", team!~"batch.*", alertname=~"Node.+",env!="dev"}', '{severity="x",team=""}', '{a=~"x|y"}',
    '{a="1",}', ' { a = "1" } ', '{severity!="info"}', '{team=""}', '{a=~".*"}', '{a!~"x"}', '{a=~"x|"}',
    r'{a="q\"b\\s\t\x41\101\u00e9\U0001F600"}', r'{a="\q"}', r'{a="\x4"}', r'{a="\xff"}', r'{a="\uD800"}', "{a=1}",
    '{b=~"("}', '{alertname=~"Watchdog|InfoInhibitor"}', '{team=~"db|storage",severity!="info"}', "{}",
    '{z="1",a=~"x)|(.*"}', '{a!=""}', '{a!~""}', '{a=~".+"}',
]
PATTERNS = [
    ("x.y", "x\ny"), (".*", "a\nb"), ("(?-s:x.y)", "x\ny"), (r"\d", "3"), (r"\D", "٣"), (r"\w+", "abc_1"),
    (r"\s", "\u00a0"), (r"[\d]", "٣"), (r"[^\D]", "7"), (r"[\w-]+", "a-b"), (r"\pL", "é"), (r"\p{^Greek}", "λ"),
    (r"[\P{^Greek}]", "λ"), (r"(?i)\w", "\u212a"), (r"é\b", "é"), (r"\Bé", "é"), ("café|naïve", "café"),
    ("[é-ë]", "ê"), ("[a&&b]", "&"), ("[a-c--b]", "-"), ("[~~]", "~"), ("[[x]]", "x]"), ("[]a]", "]"),
    ("[^]a]", "b"), ("[a-]", "-"), ("[[:digit:]x]", "x"), (r"[\d-z]", "-"), (r"\<a\>", "<a>"), (r"a\.b", "a.b"),
    (r"\Q.*+\E", ".*+"), (r"x\Q[y", "x[y"), ("a{01}", "a{01}"), ("a{,3}", "a{,3}"), ("{x}", "{x}"),
    ("a{2}", "aa"), ("a{2,}", "aaa"), ("a{1,2}?b", "ab"), ("a*?", "aa"), (r"\b{start}", "{start}"),
    (r"\x41\x{42}\101", "ABA"), (r"\0", "\0"), (r"\12x", "\nx"), (r"\1234", "S4"), (r"[\101-\103]", "B"),
    ("(?i)abc", "ABC"), ("(?U)a+", "a"), ("x|y", "xy"), ("(?P<n>a)", "a"), ("(?x)a b", "ab"), ("x)|(.*", "a"),
    ("[a", "a"), (r"(a)\1", "aa"), ("a**", "a"), ("a{2}{3}", "aaaaaa"), ("a{1001}", "a"), ("a{2,1}", "a"),
    ("(x", "x"), (r"\Z", "Z"), (r"[\b]", "b"), ("a{1000}", "a"), ("^*$", ""), ("(|a)+", "aa"), ("()", ""),
]
HEALTH = ["0", "3", '"0%"', '"25%"', '"100%"', "-1", '"101%"', '"3"', '"10%"', '"5%"', '"lots"', '"+5%"', '"-0%"',
          '"050%"', "2147483647", '"%"']
HOLDERS = ['{"maintenances":["a"],"unschedulableBefore":false}', "{oops",
           '{"maintenances":[],"unschedulableBefore":false}', '{"maintenances":["m0","gone"],"unschedulableBefore":true}',
           '{"maintenances":["m0"]}', "null", ""]
STATUSES = ['{"nodeRef":{"name":"n0"},"drainTargets":[{"podPriority":10000,"podType":"Default"}],'
            '"drainStartTime":"2026-11-26T09:00:02Z"}', "{oops", "{}",
            '{"nodeRef":{"name":"n0"},"drainTargets":[{"podPriority":2147483647,"podType":"Static"},'
            '{"podPriority":-5,"podType":"DaemonSet","podSelector":{"matchExpressions":[{"key":"app","operator":"Gt"}]}}]}',
            '{"nodeRef":{"name":"n0"},"drainTargets":[{"podPriority":5,"podType":"Bogus"}]}']


def main():
    for target in ["go_duration", "requester", "window_schedule", "window_zone", "blackout", "alert_selector",
                   "re2_regex", "health", "node_annotations", "admission"]:
        for old in (SEEDS / target).glob("*"):
            old.unlink()
    for d in DURATIONS:
        write("go_duration", d.encode())
    for r in REQUESTERS:
        write("requester", r.encode())
    for i, s in enumerate(SCHEDULES):
        write("window_schedule", window_knobs(i % 12, i % 6, i) + s.encode())
    for i, z in enumerate(ZONES):
        write("window_zone", window_knobs(i % 6, i % 6, i) + z.encode())
    for b in BLACKOUTS:
        write("blackout", knobs() + texts(*b))
    for s in SELECTORS:
        write("alert_selector", knobs() + texts(s, "severity=critical,team=db", "alertname=Watchdog"))
    for pattern, value in PATTERNS:
        write("re2_regex", knobs() + texts(pattern, value, value + "x", ""))
        write("re2_regex", knobs(1) + texts(value, pattern, value))
    for i, h in enumerate(HEALTH):
        write("health", knobs(10, 0, 0b1011_0101, 0, 0, 0, 0, 0, 0b0101, 0, 0, 0, 0, 0, 10) + texts(h, HEALTH[-i]))
    for i, h in enumerate(HOLDERS):
        write("node_annotations", knobs(0, 0b111) + texts(h, STATUSES[i % len(STATUSES)]))
    for s in STATUSES:
        write("node_annotations", knobs(0, 0b110) + texts("", s))
    endpoints = {"mutate": 0, "validate": 1, "validate-node": 2, "validate-budget": 3}
    for f in sorted((REPO / "tests/fixtures/apiserver").glob("*.json")):
        endpoint = next(e for e in sorted(endpoints, key=len, reverse=True) if f.stem.endswith("-" + e))
        write("admission", bytes([endpoints[endpoint]]) + f.read_bytes())
    # No recorded NodeDisruptionBudget review: the budget of src/admission/budget.rs' tests.
    budget = {"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
              "metadata": {"name": "general"}, "spec": {
                  "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "pool", "operator": "In", "values": ["general"]}]}]},
                  "maxUnavailable": 1,
                  "maintenanceWindows": [{"schedule": "0 22 * * SAT", "duration": "10h", "timeZone": "Europe/Berlin"},
                                         {"schedule": "0 2 * * *", "duration": "90m"}],
                  "blackouts": [{"start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z",
                                 "reason": "year-end freeze"}],
                  "pauseRequests": [{"name": "ops", "reason": "kernel regression"}, {"name": "team-b"}],
                  "healthGate": {"maxUnhealthy": "10%", "alerts": {"matchers": ['{severity="critical"}'],
                                                                  "ignore": ['{alertname=~"Watchdog|InfoInhibitor"}']}}}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "name": "general", "operation": "CREATE", "userInfo": {"username": "admin"},
        "kind": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "kind": "NodeDisruptionBudget"},
        "resource": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "resource": "nodedisruptionbudgets"},
        "object": budget}}
    write("admission", bytes([3]) + json.dumps(review).encode())
    review["request"]["operation"] = "UPDATE"
    review["request"]["oldObject"] = json.loads(json.dumps(budget))
    review["request"]["oldObject"]["spec"]["pauseRequests"] = [{"name": "Ops Team"}]
    write("admission", bytes([3]) + json.dumps(review).encode())


if __name__ == "__main__":
    main()
