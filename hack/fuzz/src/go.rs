//! Go's `time.ParseDuration` (Go 1.24 `time/format.go`), transcribed: the reference
//! `spec.drainTimeout`, `waitForCompletion.timeout` and a window's `duration` are checked
//! against. Restricted as the product documents its grammar: no leading sign, and the
//! units `ns`, `us`, `ms`, `s`, `m`, `h` (Go also reads `µs` and `μs`).

const UNITS: [(&str, u64); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The duration `text` names in nanoseconds, as Go reads it; `None` where Go returns an error
/// (or a sign or a `µs` unit is used).
pub fn parse_duration(text: &str) -> Option<u64> {
    const LIMIT: u64 = 1 << 63;
    let mut s = text.as_bytes();
    if s == b"0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return None;
        }
        // leadingInt
        let before = s.len();
        let mut v: u64 = 0;
        while let Some(&c) = s.first().filter(|c| c.is_ascii_digit()) {
            if v > LIMIT / 10 {
                return None;
            }
            v = v * 10 + u64::from(c - b'0');
            if v > LIMIT {
                return None;
            }
            s = &s[1..];
        }
        let pre = before != s.len();
        // leadingFraction
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            let mut overflow = false;
            while let Some(&c) = s.first().filter(|c| c.is_ascii_digit()) {
                s = &s[1..];
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = before != s.len();
        }
        if !pre && !post {
            return None;
        }
        let unit_len = s.iter().position(|c| *c == b'.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return None;
        }
        let unit = std::str::from_utf8(&s[..unit_len]).ok()?;
        s = &s[unit_len..];
        let (_, unit) = UNITS.iter().find(|(name, _)| *name == unit)?;
        if v > LIMIT / unit {
            return None;
        }
        v *= unit;
        if f > 0 {
            // Go's float64 arithmetic, truncated toward zero, as `uint64(...)` converts.
            v += (f as f64 * (*unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        d += v;
        if d > LIMIT {
            return None;
        }
    }
    (d < LIMIT).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn go_examples() {
        assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("1.5h"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("1.h"), Some(3_600_000_000_000));
        assert_eq!(parse_duration(".5s"), Some(500_000_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("30"), None);
        assert_eq!(parse_duration(".s"), None);
        assert_eq!(parse_duration("2562047h47m16.854775807s"), Some(i64::MAX as u64));
        assert_eq!(parse_duration("2562047h47m16.854775808s"), None);
    }
}
