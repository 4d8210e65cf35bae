//! The recorded apiserver requests in `tests/fixtures/apiserver` and their expectations
//! (`expect-standalone.json`), used unchanged.

use super::webhook::fixtures_dir;
use serde_json::Value;

/// One recorded request.
pub struct Fixture {
    pub name: String,
    pub body: Vec<u8>,
    /// Request path with query, from the recorded request line (e.g. `/mutate?timeout=10s`).
    pub path: String,
    /// Recorded headers (name, value), Host and Content-Length excluded.
    pub headers: Vec<(String, String)>,
    pub expect: Value,
}

impl Fixture {
    pub fn request(&self) -> Value {
        serde_json::from_slice::<Value>(&self.body).expect("fixture is JSON")["request"].clone()
    }
}

/// Every fixture with a standalone expectation, in name order.
pub fn standalone() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expect-standalone.json")).expect("expectations"))
            .unwrap();
    let mut names: Vec<&String> = expect.as_object().unwrap().keys().collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let exp = expect[name].get("standalone")?.clone();
            let body = std::fs::read(dir.join("apiserver").join(name)).expect("fixture body");
            let head = std::fs::read_to_string(dir.join("apiserver").join(name.replace(".json", ".headers")))
                .expect("headers");
            let mut lines = head.lines();
            let path = lines.next().unwrap().split_whitespace().nth(1).unwrap().to_string();
            let headers = lines
                .filter_map(|l| l.split_once(": "))
                .filter(|(k, _)| !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length"))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Some(Fixture { name: name.clone(), body, path, headers, expect: exp })
        })
        .collect()
}
