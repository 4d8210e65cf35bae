//! Alert matchers of a health gate (`spec.healthGate.alerts`, SPEC 4.6): a Prometheus series
//! selector without a metric name, `{severity="critical",team!~"batch.*"}`, read once and
//! matched against the labels of firing alerts.
//!
//! Grammar (PromQL's, restricted to what an alert selector needs): `{`, then label matchers
//! separated by commas (a trailing comma allowed), then `}`, with spaces anywhere between
//! tokens. A label matcher is a label name (`[a-zA-Z_][a-zA-Z0-9_]*`), an operator (`=`, `!=`,
//! `=~`, `!~`) and a double-quoted value with Go's escapes (`\"`, `\\`, `\n`, `\t`, `\x41`,
//! `\101`, `\u00e9`, `\U0001F600`, ...). A label an alert lacks has the value `""`.
//!
//! Regular expressions match as Prometheus matches them ([`super::re2`]): Go's RE2, fully
//! anchored, `.` matching a newline too, `\d` `\w` `\s` ASCII.
//!
//! Prometheus refuses a selector whose every matcher matches the empty string (`{team=""}`,
//! `{severity!="info"}`, `{a=~".*"}`): it would select every series, here every alert, an
//! always-firing Watchdog too. So does [`Selector::parse`], for every selector, whichever list
//! of an alert gate it is in.

use super::re2;
use regex::Regex;
use std::collections::BTreeMap;
use std::fmt;

/// Why a selector was refused. `at` is the 1-based character position in the selector.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    /// Something other than what the grammar allows at `at`.
    #[error("at character {at}: expected {expected}, found {found}")]
    Unexpected {
        /// Character position (1-based).
        at: usize,
        /// What the grammar allows there.
        expected: &'static str,
        /// What is there (a quoted character, or `the end`).
        found: String,
    },
    /// A backslash escape Go does not know, or one naming no character.
    #[error("at character {at}: invalid escape {escape:?} in a quoted value")]
    Escape {
        /// Character position (1-based) of the backslash.
        at: usize,
        /// The escape as written.
        escape: String,
    },
    /// A `=~` or `!~` value that is not an RE2 regular expression.
    #[error("at character {at}: invalid regular expression: {reason}")]
    Regex {
        /// Character position (1-based) of the value's opening quote.
        at: usize,
        /// What the regex parser said.
        reason: String,
    },
    /// `{}`: a selector with no matcher would match every alert.
    #[error("a selector needs at least one label matcher")]
    Empty,
    /// Every matcher matches the empty string, so the selector matches every alert (an
    /// always-firing Watchdog too); Prometheus refuses such a selector.
    #[error(
        "every matcher matches the empty string, so this selects every alert: a selector must contain at \
         least one matcher that does not match the empty string (as Prometheus requires), such as \
         severity=\"critical\""
    )]
    MatchesEmpty,
}

/// The operator of one label matcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Equal,
    NotEqual,
    Matches,
    NotMatches,
}

#[derive(Clone, Debug)]
enum Test {
    Text(String),
    Regex(Regex),
}

#[derive(Clone, Debug)]
struct LabelMatcher {
    name: String,
    op: Op,
    test: Test,
}

impl LabelMatcher {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.name).map_or("", String::as_str))
    }

    /// Whether the label's value `value` passes this matcher.
    fn matches_value(&self, value: &str) -> bool {
        let hit = match &self.test {
            Test::Text(text) => value == text,
            Test::Regex(re) => re.is_match(value),
        };
        hit == matches!(self.op, Op::Equal | Op::Matches)
    }
}

/// A parsed series selector: every label matcher must hold (AND).
#[derive(Clone, Debug)]
pub(super) struct Selector {
    matchers: Vec<LabelMatcher>,
    text: String,
}

impl Selector {
    /// Parses `text`, e.g. `{severity="critical",team!~"batch.*"}`.
    ///
    /// # Errors
    /// [`MatcherError`] naming the position and what was expected; `{}` is
    /// [`MatcherError::Empty`], and a selector whose every matcher matches the empty string
    /// (one Prometheus refuses) [`MatcherError::MatchesEmpty`].
    pub fn parse(text: &str) -> Result<Self, MatcherError> {
        let mut p = Parser { chars: text.chars().collect(), pos: 0 };
        let matchers = p.selector()?;
        // An alert lacking every label of the selector would match it: so would every alert.
        if matchers.iter().all(|m| m.matches_value("")) {
            return Err(MatcherError::MatchesEmpty);
        }
        Ok(Selector { matchers, text: text.to_owned() })
    }

    /// Whether an alert with these labels matches every label matcher.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matchers.iter().all(|m| m.matches(labels))
    }
}

impl fmt::Display for Selector {
    /// The selector as written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn skip_space(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn unexpected(&self, expected: &'static str) -> MatcherError {
        let found = self.peek().map_or_else(|| "the end".to_owned(), |c| format!("{c:?}"));
        MatcherError::Unexpected { at: self.pos + 1, expected, found }
    }

    fn expect(&mut self, c: char, expected: &'static str) -> Result<(), MatcherError> {
        self.skip_space();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn selector(&mut self) -> Result<Vec<LabelMatcher>, MatcherError> {
        self.expect('{', "'{' (a selector without a metric name)")?;
        let mut out = Vec::new();
        loop {
            self.skip_space();
            if self.peek() == Some('}') {
                self.pos += 1;
                break;
            }
            out.push(self.label_matcher()?);
            self.skip_space();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {}
                _ => return Err(self.unexpected("',' or '}'")),
            }
        }
        self.skip_space();
        if self.peek().is_some() {
            return Err(self.unexpected("nothing after '}'"));
        }
        if out.is_empty() {
            return Err(MatcherError::Empty);
        }
        Ok(out)
    }

    fn label_matcher(&mut self) -> Result<LabelMatcher, MatcherError> {
        let name = self.label_name()?;
        self.skip_space();
        let op = match (self.peek(), self.chars.get(self.pos + 1)) {
            (Some('='), Some('~')) => Op::Matches,
            (Some('!'), Some('~')) => Op::NotMatches,
            (Some('!'), Some('=')) => Op::NotEqual,
            (Some('='), _) => Op::Equal,
            _ => return Err(self.unexpected("an operator: =, !=, =~ or !~")),
        };
        self.pos += if op == Op::Equal { 1 } else { 2 };
        self.skip_space();
        let at = self.pos + 1;
        let value = self.quoted()?;
        let test = match op {
            Op::Equal | Op::NotEqual => Test::Text(value),
            Op::Matches | Op::NotMatches => {
                Test::Regex(re2::compile(&value).map_err(|reason| MatcherError::Regex { at, reason })?)
            }
        };
        Ok(LabelMatcher { name, op, test })
    }

    fn label_name(&mut self) -> Result<String, MatcherError> {
        let start = self.pos;
        match self.peek() {
            Some(c) if c.is_ascii_alphabetic() || c == '_' => self.pos += 1,
            _ => return Err(self.unexpected("a label name or '}'")),
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.pos += 1;
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }

    /// A double-quoted Go string literal.
    fn quoted(&mut self) -> Result<String, MatcherError> {
        if self.peek() != Some('"') {
            return Err(self.unexpected("a double-quoted value"));
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => return Err(self.unexpected("a closing '\"'")),
                Some('"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('\\') => out.push(self.escape()?),
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// One escape after a backslash, as Go reads it in a double-quoted string.
    fn escape(&mut self) -> Result<char, MatcherError> {
        let start = self.pos;
        self.pos += 1;
        let simple = match self.peek() {
            Some('a') => Some('\u{7}'),
            Some('b') => Some('\u{8}'),
            Some('f') => Some('\u{c}'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            Some('v') => Some('\u{b}'),
            Some('\\') => Some('\\'),
            Some('"') => Some('"'),
            _ => None,
        };
        if let Some(c) = simple {
            self.pos += 1;
            return Ok(c);
        }
        let (digits, radix) = match self.peek() {
            Some('x') => (2, 16),
            Some('u') => (4, 16),
            Some('U') => (8, 16),
            Some('0'..='7') => (3, 8),
            _ => (0, 0),
        };
        let first = if radix == 16 { self.pos + 1 } else { self.pos };
        // An unknown escape is shown as the backslash and the one character after it.
        let end = first + digits.max(1);
        let text: String = self.chars.get(first..end.min(self.chars.len())).unwrap_or_default().iter().collect();
        let escape: String = self.chars[start..end.min(self.chars.len())].iter().collect();
        let bad = || MatcherError::Escape { at: start + 1, escape: escape.clone() };
        if digits == 0 || text.chars().count() != digits {
            return Err(bad());
        }
        let code = u32::from_str_radix(&text, radix).map_err(|_| bad())?;
        // Go's \x and octal escapes are bytes; a byte above 0x7f on its own is not UTF-8 text.
        if matches!(self.peek(), Some('x' | '0'..='7')) && code > 0x7f {
            return Err(bad());
        }
        let c = char::from_u32(code).ok_or_else(bad)?;
        self.pos = end;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_four_operators_match_as_prometheus_does() {
        let s = Selector::parse(r#"{severity="critical", team!~"batch.*", alertname=~"Node.+",env!="dev"}"#).unwrap();
        assert!(s.matches(&labels(&[("severity", "critical"), ("team", "infra"), ("alertname", "NodeDown")])));
        assert!(!s.matches(&labels(&[("severity", "critical"), ("team", "batch-a"), ("alertname", "NodeDown")])));
        assert!(!s.matches(&labels(&[("severity", "critical"), ("alertname", "Node")])), "=~ is anchored");
        assert!(!s.matches(&labels(&[("severity", "critical"), ("alertname", "XNodeDown")])), "anchored at start");
        assert!(!s.matches(&labels(&[("severity", "critical"), ("alertname", "NodeDown"), ("env", "dev")])));
        let missing = Selector::parse(r#"{severity="x",team=""}"#).unwrap();
        assert!(missing.matches(&labels(&[("severity", "x")])), "a missing label is the empty value");
        let alternation = Selector::parse(r#"{a=~"x|y"}"#).unwrap();
        assert!(!alternation.matches(&labels(&[("a", "xy")])), "the whole alternation is anchored");
        assert!(Selector::parse("{a=\"1\",}").is_ok(), "trailing comma");
        assert_eq!(Selector::parse(r#" { a = "1" } "#).unwrap().to_string(), r#" { a = "1" } "#);
    }

    #[test]
    fn a_selector_whose_every_matcher_matches_the_empty_string_is_refused() {
        let want = "every matcher matches the empty string, so this selects every alert: a selector must contain \
                    at least one matcher that does not match the empty string (as Prometheus requires), such as \
                    severity=\"critical\"";
        for text in [
            r#"{severity!="info"}"#,
            r#"{team=""}"#,
            r#"{a=~".*"}"#,
            r#"{a!~"x"}"#,
            r#"{a=~"x|"}"#,
            r#"{a="", b!="x", c=~"y*"}"#,
        ] {
            let err = Selector::parse(text).unwrap_err();
            assert_eq!(err, MatcherError::MatchesEmpty, "{text}");
            assert_eq!(err.to_string(), want);
        }
        // One matcher that needs a value is enough, as for Prometheus.
        for text in [r#"{severity!="info",team="db"}"#, r#"{a!=""}"#, r#"{a!~""}"#, r#"{a=~".+"}"#] {
            assert!(Selector::parse(text).is_ok(), "{text}");
        }
    }

    /// A selector `{z="1",a=~<pattern>}` (the pattern quoted as Go quotes it), and whether it
    /// matches the value `value` of `a`.
    fn regex_matches(pattern: &str, value: &str) -> Result<bool, MatcherError> {
        let quoted = pattern.replace('\\', r"\\").replace('"', r#"\""#).replace('\n', r"\n");
        let s = Selector::parse(&format!(r#"{{z="1",a=~"{quoted}"}}"#))?;
        Ok(s.matches(&labels(&[("z", "1"), ("a", value)])))
    }

    #[test]
    fn regular_expressions_match_as_prometheus_matches_them() {
        // `.` matches a newline; Perl classes are ASCII; non-ASCII literals work.
        for (pattern, value, want) in [
            ("x.y", "x\ny", true),
            (r"\d", "3", true),
            (r"\d", "٣", false),
            (r"\w", "é", false),
            (r"\w", "e", true),
            ("café|naïve", "café", true),
        ] {
            assert_eq!(regex_matches(pattern, value), Ok(want), "{pattern:?} on {value:?}");
        }
        let err = regex_matches("x)|(.*", "a").unwrap_err();
        assert_eq!(err.to_string(), "at character 11: invalid regular expression: unexpected )");
    }

    #[test]
    fn go_escapes_are_read() {
        let s = Selector::parse(r#"{a="q\"b\\s\t\x41\101\u00e9\U0001F600"}"#).unwrap();
        assert!(s.matches(&labels(&[("a", "q\"b\\s\tAAé😀")])));
        let unknown = Selector::parse(r#"{a="\q"}"#).unwrap_err();
        assert_eq!(unknown.to_string(), r#"at character 5: invalid escape "\\q" in a quoted value"#);
        for (text, at) in [(r#"{a="\q"}"#, 5), (r#"{a="\x4"}"#, 5), (r#"{a="\xff"}"#, 5), (r#"{a="\uD800"}"#, 5)] {
            let err = Selector::parse(text).unwrap_err();
            assert!(matches!(err, MatcherError::Escape { at: a, .. } if a == at), "{text}: {err}");
        }
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let cases = [
            ("", "at character 1: expected '{' (a selector without a metric name), found the end"),
            ("up{a=\"1\"}", "at character 1: expected '{' (a selector without a metric name), found 'u'"),
            ("{a}", "at character 3: expected an operator: =, !=, =~ or !~, found '}'"),
            ("{a==\"1\"}", "at character 4: expected a double-quoted value, found '='"),
            ("{a='1'}", "at character 4: expected a double-quoted value, found '\\''"),
            ("{a=\"1\" b=\"2\"}", "at character 8: expected ',' or '}', found 'b'"),
            ("{a=\"1\"", "at character 7: expected ',' or '}', found the end"),
            ("{a=\"1}", "at character 7: expected a closing '\"', found the end"),
            ("{1a=\"1\"}", "at character 2: expected a label name or '}', found '1'"),
            ("{a=\"1\"} x", "at character 9: expected nothing after '}', found 'x'"),
            ("{}", "a selector needs at least one label matcher"),
        ];
        for (text, want) in cases {
            assert_eq!(Selector::parse(text).unwrap_err().to_string(), want, "{text:?}");
        }
        let err = Selector::parse(r#"{a=~"(x"}"#).unwrap_err();
        assert!(matches!(&err, MatcherError::Regex { at: 5, reason } if reason.contains("unclosed group")), "{err}");
    }
}
