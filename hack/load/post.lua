-- wrk script for hack/load.sh: POSTs one AdmissionReview body over and over and, at the end,
-- prints one JSON line with throughput, latency percentiles (microseconds) and errors.
--
--   WRK_BODY=tests/fixtures/apiserver/01-create-minimal-validate.json \
--     wrk -t2 -c64 -d10s -s hack/load/post.lua 'https://127.0.0.1:8443/validate?timeout=10s'
--
-- The body is read at load time in every thread (wrk runs this file once per thread).

local path = os.getenv("WRK_BODY")
if path == nil or path == "" then
  error("set WRK_BODY to the AdmissionReview file to POST")
end
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
wrk.headers["Content-Type"] = "application/json"
f:close()

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"timeouts":%d,"non2xx":%d,"mean_us":%.1f,"p50_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"p999_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.timeout,
    e.status, latency.mean, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max))
end
