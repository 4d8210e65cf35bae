//! Regular expressions of alert matchers read as Prometheus reads them (SPEC 4.6): Go's RE2,
//! parsed with Perl syntax and compiled as `^(?s:re)$`, so fully anchored and with `.`
//! matching a newline too.
//!
//! The `regex` crate reads most RE2 alike. [`compile`] rewrites, before compiling, what it
//! reads otherwise, so that a pattern matches the same values here as in Prometheus:
//! - `\d` `\w` `\s` (and `\D` `\W` `\S`, also inside brackets) and `\b` `\B` are ASCII in Go
//!   but Unicode in the crate (`\d` would match `٣`, `\w` `é`);
//! - inside brackets, the crate's nested classes and `&&` `--` `~~` set operations are plain
//!   characters in Go (`[a&&b]` is `a`, `&` or `b`);
//! - an escaped punctuation character is that character in Go (`\<` is a word boundary in
//!   the crate);
//! - a `{` that does not start a repetition is a character in Go (`a{,3}`, `a{01}`, `{x}`);
//! - octal escapes (`\101`), Go's `\Q...\E` quoting and negated Unicode classes (`\p{^Greek}`)
//!   are written as the crate reads them.
//!
//! And it refuses what Go refuses but the crate would take: the crate's flags `x`, `R` and
//! `u`, a `)` closing no group (which would otherwise close the anchoring group: `a)|(.*`
//! would match anything), stacked repetitions (`a**`) and counts over 1000. Anything else is
//! kept as written, so that what the crate cannot read is still refused by it.

use regex::Regex;

/// Characters the regex crate reads as syntax somewhere; escaped, each is itself anywhere.
const RUST_META: &str = r"\.+*?()|[]{}^$#&-~";

/// Flags Go's RE2 knows (and `-` to clear them).
const GO_FLAGS: &str = "imsU-";

/// Go's largest repetition count.
const MAX_REPEAT: u32 = 1000;

/// Compiles `pattern`, an RE2 expression as a Prometheus label matcher holds it, into a regex
/// that matches exactly the values Prometheus' matcher matches.
///
/// # Errors
/// Why the pattern is refused, for a person: Go would refuse it (see the module
/// documentation), or the crate cannot read it.
pub(super) fn compile(pattern: &str) -> Result<Regex, String> {
    let rewritten = go_regex(pattern)?;
    // Prometheus anchors the expression and lets `.` match a newline.
    Regex::new(&format!("^(?s:{rewritten})$")).map_err(|e| regex_reason(&e))
}

/// `c` as a literal the regex crate reads as `c`, inside or outside brackets.
fn push_literal(out: &mut String, c: char) {
    if RUST_META.contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// Go's Perl class `\<class>` (`d`, `D`, `w`, `W`, `s`, `S`) as the regex crate reads it the
/// same way: ASCII only, as RE2 defines them (`\s` without `\v`). Written as a bracketed class,
/// which stands both alone and nested inside brackets, and which `(?i)` folds as Go folds
/// the Perl classes (`\w` then also matches the Kelvin sign, in both).
fn perl_class(class: char) -> Option<&'static str> {
    Some(match class {
        'd' => "[0-9]",
        'D' => "[^0-9]",
        'w' => "[0-9A-Za-z_]",
        'W' => "[^0-9A-Za-z_]",
        's' => r"[\t\n\f\r ]",
        'S' => r"[^\t\n\f\r ]",
        _ => return None,
    })
}

/// The position of the first `close` at or after `from`, or the end.
fn find(chars: &[char], from: usize, close: char) -> usize {
    chars.get(from..).and_then(|rest| rest.iter().position(|&c| c == close)).map_or(chars.len(), |at| from + at)
}

/// Rewrites the Unicode class starting with the backslash at `chars[at]` (`\pL`, `\PL`,
/// `\p{Greek}`, `\p{^Greek}`) into `out`, and returns the position after it. Go negates a
/// class with `^` inside the braces, the crate does not know that form: it is written with
/// the other letter.
fn unicode_class(chars: &[char], at: usize, out: &mut String) -> usize {
    let negated = chars.get(at + 1) == Some(&'P');
    if chars.get(at + 2) == Some(&'{') && chars.get(at + 3) == Some(&'^') {
        let end = (find(chars, at + 4, '}') + 1).min(chars.len());
        out.push_str(if negated { r"\p{" } else { r"\P{" });
        out.extend(&chars[at + 4..end]);
        return end;
    }
    let end = if chars.get(at + 2) == Some(&'{') { find(chars, at + 3, '}') + 1 } else { at + 3 };
    let end = end.min(chars.len());
    out.extend(&chars[at..end]);
    end
}

/// Rewrites the escape naming one character that starts with the backslash at `chars[at]`
/// (`\n`, `\x41`, `\x{10FFFF}`, `\101`) into `out`, and returns the position after it.
///
/// Go reads up to three octal digits after `\0`, and after `\1`-`\7` when an octal digit
/// follows (a lone `\1` would be a backreference, which RE2 does not have); the regex crate
/// reads octal only when told to, and then also a lone `\1`, so octal is written in hex.
/// Other escapes are the same in both and copied.
///
/// # Errors
/// A lone `\1`-`\7`.
fn single_escape(chars: &[char], at: usize, out: &mut String) -> Result<usize, String> {
    let octal = |i: usize| chars.get(i).and_then(|c| c.to_digit(8));
    let end = match chars.get(at + 1) {
        Some('1'..='7') if octal(at + 2).is_none() => {
            return Err(format!("invalid escape sequence \\{} (RE2 has no backreferences)", chars[at + 1]));
        }
        Some('0'..='7') => {
            let digits = (at + 1..at + 4).take_while(|&i| octal(i).is_some());
            let code = digits.clone().fold(0, |code, i| code * 8 + octal(i).unwrap_or_default());
            out.push_str(&format!(r"\x{{{code:x}}}"));
            return Ok(at + 1 + digits.count());
        }
        Some('x') if chars.get(at + 2) == Some(&'{') => find(chars, at + 3, '}') + 1,
        Some('x') => at + 4,
        _ => at + 2,
    };
    let end = end.min(chars.len());
    out.extend(&chars[at..end]);
    Ok(end)
}

/// Reads a repetition `{n}`, `{n,}` or `{n,m}` at `chars[at]` as Go does: `None` when it is not
/// one (then Go reads the `{` as a character: `{,3}`, `{x}`, and `{01}`, Go allowing no
/// leading zero), else the position after it.
///
/// # Errors
/// A count over 1000, or a maximum below the minimum.
fn repetition(chars: &[char], at: usize) -> Result<Option<usize>, String> {
    // A count: digits without a leading zero; saturated, as only "over 1000" matters.
    let count = |from: usize| -> Option<(u32, usize)> {
        let len = chars.get(from..)?.iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 || (len > 1 && chars[from] == '0') {
            return None;
        }
        let value = chars[from..from + len]
            .iter()
            .fold(0u32, |n, c| n.saturating_mul(10).saturating_add(c.to_digit(10).unwrap_or_default()));
        Some((value, from + len))
    };
    let Some((min, mut i)) = count(at + 1) else { return Ok(None) };
    let mut max = Some(min);
    if chars.get(i) == Some(&',') {
        i += 1;
        max = None;
        if chars.get(i) != Some(&'}') {
            let Some((m, after)) = count(i) else { return Ok(None) };
            (max, i) = (Some(m), after);
        }
    }
    if chars.get(i) != Some(&'}') {
        return Ok(None);
    }
    if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
        let text: String = chars[at..=i].iter().collect();
        return Err(format!(
            "invalid repeat count {text} (at most {MAX_REPEAT}, and the maximum not below the minimum)"
        ));
    }
    Ok(Some(i + 1))
}

/// Rewrites a regular expression as Go's RE2 (Prometheus) reads it into one the regex crate
/// reads the same way; see the module documentation for what differs.
///
/// # Errors
/// A flag Go does not have (`x`, `R`, `u`), a `)` closing no group, a `[` without its `]`, a
/// lone `\1`-`\7` (a backreference), stacked repetitions or a bad repetition count, as a
/// reason for a person.
fn go_regex(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    // Open groups: a `)` closing none would close the anchoring group `compile` wraps the
    // expression in, where Go refuses it.
    let mut depth = 0usize;
    // Whether the last item is a repetition: Go refuses another one right after (`a**`,
    // `a{2}+`), where the crate would repeat the repetition.
    let mut repeated = false;
    let mut i = 0;
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        let mut repeats = false;
        match chars[i] {
            '\\' => {
                if let Some(class) = next.and_then(perl_class) {
                    out.push_str(class);
                    i += 2;
                } else if let Some(c @ ('b' | 'B')) = next {
                    out.push_str(if c == 'b' { r"(?-u:\b)" } else { r"(?-u:\B)" });
                    i += 2;
                } else if next == Some('Q') {
                    // Quoted text up to `\E` or the end.
                    let rest = &chars[i + 2..];
                    let end = rest.windows(2).position(|w| w == ['\\', 'E']);
                    let quoted = &rest[..end.unwrap_or(rest.len())];
                    quoted.iter().for_each(|&c| push_literal(&mut out, c));
                    i += 2 + quoted.len() + if end.is_some() { 2 } else { 0 };
                } else if let Some(c) = next.filter(char::is_ascii_punctuation) {
                    push_literal(&mut out, c);
                    i += 2;
                } else if matches!(next, Some('p' | 'P')) {
                    i = unicode_class(&chars, i, &mut out);
                } else {
                    // `\n`, `\x41`, `\101`, `\A`, `\z`, ...
                    i = single_escape(&chars, i, &mut out)?;
                }
            }
            '[' => i = go_class(&chars, i, &mut out)?,
            '(' => {
                depth += 1;
                if next == Some('?') && !matches!(chars.get(i + 2), Some('P' | '<')) {
                    let flags = chars[i + 2..].iter().take_while(|&&c| c != ')' && c != ':');
                    if let Some(flag) = flags.clone().find(|&&c| !GO_FLAGS.contains(c)) {
                        return Err(format!(
                            "unsupported {flag:?} after \"(?\" (Go's RE2 has the flags i, m, s and U)"
                        ));
                    }
                    // The `?` is not a repetition: copied with the group's opening.
                    out.push_str("(?");
                    i += 2;
                } else {
                    out.push('(');
                    i += 1;
                }
            }
            ')' => {
                depth = depth.checked_sub(1).ok_or("unexpected )")?;
                out.push(')');
                i += 1;
            }
            c @ ('*' | '+' | '?' | '{') => {
                let end = if c == '{' { repetition(&chars, i)? } else { Some(i + 1) };
                match end {
                    Some(end) => {
                        if repeated {
                            let text: String = chars[..end].iter().collect();
                            return Err(format!("invalid nested repetition operator in {text:?}"));
                        }
                        out.extend(&chars[i..end]);
                        i = end;
                        // A `?` right after a repetition makes it non-greedy, in both.
                        if chars.get(i) == Some(&'?') {
                            out.push('?');
                            i += 1;
                        }
                        repeats = true;
                    }
                    None => {
                        out.push_str(r"\{");
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
        repeated = repeats;
    }
    Ok(out)
}

/// Rewrites the bracketed class opening at `chars[start]` as Go reads it (`regexp/syntax`'s
/// `parseClass`) into `out`, and returns the position after its `]`.
///
/// Go reads, after an optional `^`, items up to a `]` that is not the first: a POSIX class
/// (`[:alpha:]`, the same in the crate), a Unicode class (`\pL`, `\p{Greek}`), a Perl class,
/// or a character or a range of two (`a-z`; a `-` before the closing `]` is a character).
/// Every other character is itself, so characters the crate reads as syntax inside brackets
/// (`[`, `&`, `-`, `~`) are escaped.
///
/// # Errors
/// No closing `]`, or a lone `\1`-`\7`.
fn go_class(chars: &[char], start: usize, out: &mut String) -> Result<usize, String> {
    let mut i = start + 1;
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let mut first = true;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err("missing closing ]".to_owned());
        };
        if c == ']' && !first {
            out.push(']');
            return Ok(i + 1);
        }
        first = false;
        let next = chars.get(i + 1).copied();
        if c == '[' && next == Some(':') {
            let rest = &chars[i + 2..];
            if let Some(end) = rest.windows(2).position(|w| w == [':', ']']) {
                out.extend(&chars[i..i + 2 + end + 2]);
                i += 2 + end + 2;
                continue;
            }
        }
        if c == '\\' && matches!(next, Some('p' | 'P')) {
            i = unicode_class(chars, i, out);
            continue;
        }
        if c == '\\'
            && let Some(class) = next.and_then(perl_class)
        {
            out.push_str(class);
            i += 2;
            continue;
        }
        i = class_char(chars, i, out)?;
        if chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|&c| c != ']') {
            out.push('-');
            i = class_char(chars, i + 1, out)?;
        }
    }
}

/// Rewrites the one character at `chars[at]` inside brackets (itself or an escape naming it)
/// into `out`, and returns the position after it.
///
/// # Errors
/// As [`single_escape`].
fn class_char(chars: &[char], at: usize, out: &mut String) -> Result<usize, String> {
    match (chars[at], chars.get(at + 1).copied()) {
        ('\\', Some(c)) if c.is_ascii_punctuation() => {
            push_literal(out, c);
            Ok(at + 2)
        }
        ('\\', _) => single_escape(chars, at, out),
        (c, _) => {
            push_literal(out, c);
            Ok(at + 1)
        }
    }
}

/// The regex crate's message without the pattern echo, on one line.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(&text);
    last.trim().trim_start_matches("error: ").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row was checked against Go's `regexp` compiling `^(?s:re)$`, as Prometheus does.
    #[test]
    fn patterns_match_what_they_match_in_prometheus() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, bool)] = &[
            // `.` matches a newline, unless the pattern says not.
            ("x.y", "x\ny", true), (".*", "a\nb", true), ("(?-s:x.y)", "x\ny", false),
            // Perl classes are ASCII, as in Go's RE2 (`\s` without `\v`); Unicode classes stay.
            (r"\d", "3", true), (r"\d", "٣", false), (r"\D", "٣", true), (r"\D", "3", false),
            (r"\w+", "abc_1", true), (r"\w", "é", false), (r"\W", "é", true),
            (r"\s", " ", true), (r"\s", "\u{a0}", false), (r"\s", "\u{b}", false), (r"\S", "\u{a0}", true),
            (r"[\d]", "٣", false), (r"[\d]", "7", true), (r"[^\d]", "٣", true), (r"[^\D]", "7", true),
            (r"[\w-]+", "a-b", true), (r"[\s\d]", "٣", false), (r"\pL", "é", true), (r"\p{Arabic}", "٣", true),
            (r"\p{^Greek}", "a", true), (r"\p{^Greek}", "λ", false), (r"[\P{^Greek}]", "λ", true),
            // Go folds the letters of a Perl class under (?i), the Kelvin sign included.
            (r"(?i)\w", "\u{212a}", true),
            // \b is an ASCII word boundary: é is not a word character.
            (r"é\b", "é", false), (r"e\b", "e", true), (r"\Bé", "é", true),
            // Non-ASCII literals, classes and ranges.
            ("café|naïve", "café", true), ("[é-ë]", "ê", true), ("日本.*", "日本語", true),
            // Inside brackets `&&`, `--`, `~~` and `[` are characters, not set operations.
            ("[a&&b]", "&", true), ("[a-c--b]", "b", true), ("[a-c--b]", "-", true), ("[~~]", "~", true),
            ("[[x]]", "x]", true), ("[[x]]", "x", false), ("[]a]", "]", true), ("[^]a]", "b", true),
            ("[a-]", "-", true), ("[[:digit:]x]", "x", true), ("[[:alpha:]]", "é", false),
            // A `-` after a class is a character.
            (r"[\d-z]", "-", true), (r"[\d-z]", "z", true), (r"[\d-z]", "y", false),
            // An escaped punctuation character is itself (`\<` is no word boundary in Go).
            (r"\<a\>", "<a>", true), (r"a\.b", "a.b", true), (r"a\.b", "axb", false),
            // Go's quoted text.
            (r"\Q.*+\E", ".*+", true), (r"\Q.*+\E", "ab", false), (r"x\Q[y", "x[y", true),
            // A `{` that starts no repetition is a character; repetitions as before.
            ("a{01}", "a{01}", true), ("a{01}", "a", false), ("a{,3}", "a{,3}", true), ("{x}", "{x}", true),
            ("a{2}", "aa", true), ("a{2,}", "aaa", true), ("a{1,2}?b", "ab", true), ("a*?", "aa", true),
            (r"\b{start}", "{start}", false),
            // Octal and hex escapes.
            (r"\x41\x{42}\101", "ABA", true), (r"\0", "\0", true), (r"\12x", "\nx", true),
            (r"\1234", "S4", true), (r"[\101-\103]", "B", true),
            // Flags Go has; anchoring.
            ("(?i)abc", "ABC", true), ("(?U)a+", "a", true), ("x|y", "xy", false), ("(?P<n>a)", "a", true),
        ];
        for (pattern, value, want) in cases {
            let re = compile(pattern).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
            assert_eq!(re.is_match(value), *want, "{pattern:?} on {value:?} (as {re})");
        }
    }

    /// What Go refuses is refused, with a reason a person can act on.
    #[test]
    fn patterns_prometheus_refuses_are_refused() {
        for (pattern, reason) in [
            ("(?x)a b", "unsupported 'x' after \"(?\" (Go's RE2 has the flags i, m, s and U)"),
            ("(?u)a", "unsupported 'u' after \"(?\""),
            ("(?R)a", "unsupported 'R' after \"(?\""),
            ("(?=a)", "unsupported '=' after \"(?\""),
            ("x)|(.*", "unexpected )"),
            ("[a", "missing closing ]"),
            (r"(a)\1", r"invalid escape sequence \1 (RE2 has no backreferences)"),
            (r"[\7]", r"invalid escape sequence \7"),
            ("a**", r#"invalid nested repetition operator in "a**""#),
            ("a{2}{3}", "invalid nested repetition operator"),
            ("a{2}+", "invalid nested repetition operator"),
            ("a*?+", "invalid nested repetition operator"),
            ("a{1001}", "invalid repeat count {1001}"),
            ("a{2,1}", "invalid repeat count {2,1}"),
            ("a{0,99999999999}", "invalid repeat count"),
            ("(x", "unclosed group"),
            (r"\Z", "unrecognized escape sequence"),
            (r"[\b]", "invalid escape sequence"),
        ] {
            let err = compile(pattern).unwrap_err();
            assert!(err.contains(reason), "{pattern:?}: {err}");
        }
        assert!(compile("a{1000}").is_ok() && compile("a{0,1000}").is_ok());
    }
}
