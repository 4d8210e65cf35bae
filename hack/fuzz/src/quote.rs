//! Go's string and regular expression quoting, to write values into alert selectors.

/// `s` as a double-quoted Go string literal, each character written as `style` (cycled)
/// picks: itself where it may stand alone, or one of Go's escapes for it (`\x`, octal, `\u`,
/// `\U`, or the short form such as `\n`). `style` empty: the plainest form.
pub fn go_quote(s: &str, style: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for (i, c) in s.chars().enumerate() {
        let pick = if style.is_empty() { 0 } else { style[i % style.len()] % 6 };
        let code = u32::from(c);
        match (pick, c) {
            (1, _) if code < 0x80 => out.push_str(&format!("\\x{code:02x}")),
            (2, _) if code < 0x80 => out.push_str(&format!("\\{code:03o}")),
            (3, _) if code < 0x10000 => out.push_str(&format!("\\u{code:04X}")),
            (4, _) => out.push_str(&format!("\\U{code:08x}")),
            (_, '"') => out.push_str("\\\""),
            (_, '\\') => out.push_str("\\\\"),
            (_, '\n') => out.push_str("\\n"),
            (5, '\t') => out.push_str("\\t"),
            (5, '\r') => out.push_str("\\r"),
            (5, '\u{7}') => out.push_str("\\a"),
            (5, '\u{8}') => out.push_str("\\b"),
            (5, '\u{c}') => out.push_str("\\f"),
            (5, '\u{b}') => out.push_str("\\v"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `regexp.QuoteMeta`: `s` as a regular expression matching exactly `s`.
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
