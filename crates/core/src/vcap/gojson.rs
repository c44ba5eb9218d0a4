//! A JSON decoder and encoder that reproduce Go's `encoding/json` byte for byte, for values
//! decoded into `any` (`map[string]any`, `[]any`, `float64`, `string`, `bool`, `nil`).
//!
//! Why not serde_json: the Go operator writes `VCAP_SERVICES` with `encoding/json`, and capdeck
//! must see such a Secret as unchanged. That needs Go's number handling (everything goes through
//! float64), its string escaping (HTML characters, U+2028/2029, `\ufffd` for invalid UTF-8 held in
//! a Go string) and its decoder's treatment of invalid UTF-8 (one U+FFFD per bad byte). Strings
//! are therefore bytes here, not `String`: a `text` property copies Secret bytes verbatim, exactly
//! like Go's `string(data[key])`.

use std::collections::BTreeMap;
use std::fmt;

/// Nesting deeper than this is refused with an error. Go allows 10000; we stop earlier to keep
/// recursion far away from the 2 MiB stacks of tokio worker threads. Real credentials nest < 10.
pub const MAX_DEPTH: usize = 512;

/// A JSON value as Go's `encoding/json` holds it after `Unmarshal` into `any`.
#[derive(Clone, Debug, PartialEq)]
pub enum GoValue {
    Null,
    Bool(bool),
    /// Go decodes every JSON number into a float64.
    Number(f64),
    /// A Go string: arbitrary bytes, usually but not necessarily UTF-8.
    String(Vec<u8>),
    Array(Vec<GoValue>),
    Object(GoMap),
}

/// `map[string]any`: Go sorts keys by byte order when encoding, which `BTreeMap<String, _>` gives.
pub type GoMap = BTreeMap<String, GoValue>;

impl GoValue {
    pub fn string(s: impl Into<Vec<u8>>) -> Self {
        Self::String(s.into())
    }

    pub fn as_object(&self) -> Option<&GoMap> {
        match self {
            Self::Object(map) => Some(map),
            _ => None,
        }
    }

    /// The string's bytes as UTF-8 text, if it is a string.
    pub fn as_str_lossy(&self) -> Option<String> {
        match self {
            Self::String(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }

    /// Go's `encoding/json.Marshal` of this value (HTML escaping on, compact).
    pub fn to_go_json(&self) -> String {
        let mut out = String::new();
        encode_value(self, &mut out);
        out
    }
}

impl From<&str> for GoValue {
    fn from(s: &str) -> Self {
        Self::String(s.as_bytes().to_vec())
    }
}

/// Why a byte sequence is not JSON that Go would accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct GoJsonError {
    pub message: String,
    /// Byte offset where the problem was found.
    pub offset: usize,
}

impl fmt::Display for GoJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

/// Decode `input` the way `json.Unmarshal(input, &v)` with `var v any` does.
pub fn decode(input: &[u8]) -> Result<GoValue, GoJsonError> {
    let mut parser = Parser { input, pos: 0, key: None };
    parser.skip_whitespace();
    if parser.pos >= input.len() {
        // Go: "unexpected end of JSON input", also for a missing Secret key (nil bytes).
        return Err(parser.error("unexpected end of JSON input"));
    }
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.pos < input.len() {
        return Err(parser.error("invalid character after top-level value"));
    }
    Ok(value)
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    /// The key whose value is being read (innermost object), to name where a bad value is.
    key: Option<String>,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> GoJsonError {
        GoJsonError { message: message.to_string(), offset: self.pos }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<GoValue, GoJsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error("exceeded max nesting depth"));
        }
        match self.peek() {
            None => Err(self.error("unexpected end of JSON input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(GoValue::String(self.string()?)),
            Some(b't') => self.literal(b"true", GoValue::Bool(true)),
            Some(b'f') => self.literal(b"false", GoValue::Bool(false)),
            Some(b'n') => self.literal(b"null", GoValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("invalid character looking for beginning of value")),
        }
    }

    fn literal(&mut self, text: &[u8], value: GoValue) -> Result<GoValue, GoJsonError> {
        if self.input[self.pos..].starts_with(text) {
            self.pos += text.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn object(&mut self, depth: usize) -> Result<GoValue, GoJsonError> {
        self.pos += 1; // '{'
        let mut map = GoMap::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(GoValue::Object(map));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.error("invalid character looking for beginning of object key string"));
            }
            // Keys are decoded like values: invalid UTF-8 becomes U+FFFD, so they are valid text.
            let key = String::from_utf8_lossy(&self.string()?).into_owned();
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.error("invalid character after object key"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let outer = self.key.replace(key.clone());
            let value = self.value(depth + 1)?;
            self.key = outer;
            // Duplicate keys: the last one wins, as in Go.
            map.insert(key, value);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(GoValue::Object(map));
                }
                None => return Err(self.error("unexpected end of JSON input")),
                Some(_) => return Err(self.error("invalid character after object key:value pair")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<GoValue, GoJsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(GoValue::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(GoValue::Array(items));
                }
                None => return Err(self.error("unexpected end of JSON input")),
                Some(_) => return Err(self.error("invalid character after array element")),
            }
        }
    }

    fn number(&mut self) -> Result<GoValue, GoJsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("invalid character in numeric literal")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid character after decimal point in numeric literal"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid character in exponent of numeric literal"));
            }
            self.digits();
        }
        // The slice holds only ASCII digits, signs, '.', 'e': always valid UTF-8.
        let text =
            std::str::from_utf8(&self.input[start..self.pos]).map_err(|_| self.error("invalid numeric literal"))?;
        // Rust's parse is correctly rounded, like Go's strconv.ParseFloat.
        match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(GoValue::Number(value)),
            // Never the number itself: it may be a credential.
            _ => Err(GoJsonError {
                message: format!(
                    "cannot unmarshal a number of {} characters{} into Go value of type float64 (out of its range)",
                    text.len(),
                    self.key.as_ref().map(|key| format!(" at key {key:?}")).unwrap_or_default()
                ),
                offset: start,
            }),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// A JSON string, unquoted the way Go's `unquoteBytes` does it.
    fn string(&mut self) -> Result<Vec<u8>, GoJsonError> {
        self.pos += 1; // opening quote
        let mut out = Vec::new();
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.error("unexpected end of JSON input"));
            };
            match byte {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                0x00..=0x1f => return Err(self.error("invalid character in string literal")),
                0x20..=0x7f => {
                    out.push(byte);
                    self.pos += 1;
                }
                _ => {
                    let (ch, size) = decode_rune(&self.input[self.pos..]);
                    push_char(&mut out, ch.unwrap_or(char::REPLACEMENT_CHARACTER));
                    self.pos += size;
                }
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), GoJsonError> {
        let Some(byte) = self.peek() else {
            return Err(self.error("unexpected end of JSON input"));
        };
        self.pos += 1;
        let simple = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let first = self.hex4()?;
                let ch = if (0xD800..0xDC00).contains(&first) {
                    // A high surrogate must be followed by `\u` + low surrogate, else U+FFFD and
                    // the following text is decoded on its own (Go's behaviour).
                    let rest = &self.input[self.pos..];
                    if rest.len() >= 6 && rest[0] == b'\\' && rest[1] == b'u' {
                        let saved = self.pos;
                        self.pos += 2;
                        let second = self.hex4()?;
                        if (0xDC00..0xE000).contains(&second) {
                            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                            char::from_u32(combined)
                        } else {
                            self.pos = saved;
                            None
                        }
                    } else {
                        None
                    }
                } else {
                    char::from_u32(first)
                };
                push_char(out, ch.unwrap_or(char::REPLACEMENT_CHARACTER));
                return Ok(());
            }
            _ => return Err(self.error("invalid character in string escape code")),
        };
        out.push(simple);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, GoJsonError> {
        let Some(digits) = self.input.get(self.pos..self.pos + 4) else {
            return Err(self.error("unexpected end of JSON input"));
        };
        let mut value = 0u32;
        for &digit in digits {
            let nibble = char::from(digit)
                .to_digit(16)
                .ok_or_else(|| self.error("invalid character in \\u hexadecimal character escape"))?;
            value = value * 16 + nibble;
        }
        self.pos += 4;
        Ok(value)
    }
}

fn push_char(out: &mut Vec<u8>, ch: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
}

/// Go's `utf8.DecodeRune`: the rune and its length, or `None` and length 1 for an invalid byte.
/// (Rust's lossy conversion replaces a whole truncated sequence at once; Go replaces each byte.)
pub fn decode_rune(bytes: &[u8]) -> (Option<char>, usize) {
    let Some(&first) = bytes.first() else {
        return (None, 0);
    };
    let len = match first {
        0x00..=0x7f => return (Some(char::from(first)), 1),
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return (None, 1),
    };
    match bytes.get(..len).map(std::str::from_utf8) {
        Some(Ok(text)) => (text.chars().next(), len),
        _ => (None, 1),
    }
}

fn encode_value(value: &GoValue, out: &mut String) {
    match value {
        GoValue::Null => out.push_str("null"),
        GoValue::Bool(true) => out.push_str("true"),
        GoValue::Bool(false) => out.push_str("false"),
        GoValue::Number(number) => out.push_str(&format_float(*number)),
        GoValue::String(bytes) => encode_string(bytes, out),
        GoValue::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                encode_value(item, out);
            }
            out.push(']');
        }
        GoValue::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                encode_string(key.as_bytes(), out);
                out.push(':');
                encode_value(item, out);
            }
            out.push('}');
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Go's `appendString` with `escapeHTML = true`.
fn encode_string(bytes: &[u8], out: &mut String) {
    out.push('"');
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte < 0x80 {
            match byte {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                0x08 => out.push_str("\\b"),
                0x0c => out.push_str("\\f"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                0x00..=0x1f | b'<' | b'>' | b'&' => {
                    out.push_str("\\u00");
                    out.push(char::from(HEX[usize::from(byte >> 4)]));
                    out.push(char::from(HEX[usize::from(byte & 0xf)]));
                }
                _ => out.push(char::from(byte)),
            }
            index += 1;
            continue;
        }
        let (ch, size) = decode_rune(&bytes[index..]);
        match ch {
            // Go writes the six characters `\ufffd` for a byte that is not valid UTF-8.
            None => out.push_str("\\ufffd"),
            Some('\u{2028}') => out.push_str("\\u2028"),
            Some('\u{2029}') => out.push_str("\\u2029"),
            Some(ch) => out.push(ch),
        }
        index += size;
    }
    out.push('"');
}

/// Go's float64 encoding in `encoding/json`: shortest round-trip digits, plain notation for
/// 1e-6 <= |x| < 1e21, otherwise exponent form with a sign and at least two exponent digits for
/// positive exponents (`1e+21`) and no zero padding for negative ones (`1e-7`).
pub fn format_float(value: f64) -> String {
    let (negative, digits, exponent) = shortest_digits(value);
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&exponent.unsigned_abs().to_string());
    } else if exponent < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', exponent.unsigned_abs() as usize - 1));
        out.push_str(&digits);
    } else {
        let integer_len = exponent.unsigned_abs() as usize + 1;
        if digits.len() <= integer_len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', integer_len - digits.len()));
        } else {
            out.push_str(&digits[..integer_len]);
            out.push('.');
            out.push_str(&digits[integer_len..]);
        }
    }
    out
}

/// Sign, significant digits and decimal exponent (`d.ddd × 10^exponent`) of the shortest
/// decimal that round-trips to `value`, choosing like Go when two such decimals are equally
/// short: the one closest to the exact binary value, ties to the even digit. Rust's shortest
/// mode rounds such ties up (97259929426751.125 → `…751.13`, Go writes `…751.12`); its exact
/// mode rounds ties to even, so the shortest length is re-rendered in exact mode and kept
/// when it still round-trips.
fn shortest_digits(value: f64) -> (bool, String, i32) {
    let shortest = format!("{:e}", value.abs());
    let significant =
        shortest.split('e').next().map_or(1, |mantissa| mantissa.chars().filter(char::is_ascii_digit).count());
    let mut chosen = shortest;
    if significant > 1 {
        let exact = format!("{:.*e}", significant - 1, value.abs());
        if exact.parse::<f64>() == Ok(value.abs()) {
            chosen = exact;
        }
    }
    let (mantissa, exponent) = chosen.split_once('e').unwrap_or((chosen.as_str(), "0"));
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Exact mode may pad with zeros ("1.50e0"); shortest digits never end in zero.
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    (value.is_sign_negative(), digits, exponent.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(input: &str) -> String {
        decode(input.as_bytes()).expect("valid json").to_go_json()
    }

    #[test]
    fn object_keys_are_sorted_at_every_level() {
        assert_eq!(
            roundtrip(r#"{"b":1,"a":{"z":1,"y":[{"d":1,"c":2}]}}"#),
            r#"{"a":{"y":[{"c":2,"d":1}],"z":1},"b":1}"#
        );
    }

    #[test]
    fn keys_sort_by_bytes_not_by_case_or_locale() {
        assert_eq!(roundtrip(r#"{"b":1,"B":2,"a":3,"_":4,"é":5}"#), r#"{"B":2,"_":4,"a":3,"b":1,"é":5}"#);
    }

    #[test]
    fn output_is_compact() {
        assert_eq!(roundtrip("{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } }"), r#"{"a":[1,2],"b":{}}"#);
    }

    #[test]
    fn html_characters_are_escaped() {
        assert_eq!(roundtrip(r#""<a href='x'>&amp;</a>""#), r#""\u003ca href='x'\u003e\u0026amp;\u003c/a\u003e""#);
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped() {
        assert_eq!(roundtrip("\"a\u{2028}b\u{2029}c\""), r#""a\u2028b\u2029c""#);
    }

    #[test]
    fn short_escapes_for_common_control_characters() {
        assert_eq!(roundtrip(r#""\b\f\n\r\t\"\\""#), r#""\b\f\n\r\t\"\\""#);
    }

    #[test]
    fn other_control_characters_use_lowercase_hex() {
        assert_eq!(roundtrip(r#""\u0000\u0001\u001f\u001B""#), r#""\u0000\u0001\u001f\u001b""#);
    }

    #[test]
    fn slash_and_non_ascii_are_not_escaped() {
        assert_eq!(roundtrip(r#""https://x/ü/日本/\u00e9/😀\ud83d\ude00""#), "\"https://x/ü/日本/é/😀😀\"");
        // DEL is in Go's safe set.
        assert_eq!(GoValue::string(vec![0x7f]).to_go_json(), "\"\u{7f}\"");
    }

    #[test]
    fn invalid_utf8_in_a_go_string_is_written_as_escaped_replacement() {
        // A `text` property holds raw Secret bytes; Go writes `\ufffd` per invalid byte.
        let value = GoValue::String(vec![b'a', 0xff, b'b', 0xe2, 0x82, b'c']);
        assert_eq!(value.to_go_json(), r#""a\ufffdb\ufffd\ufffdc""#);
    }

    #[test]
    fn invalid_utf8_inside_json_is_decoded_to_replacement_characters() {
        // The decoder replaces each invalid byte with U+FFFD; the encoder then writes it raw.
        let value = decode(b"\"a\xffb\xe2\x82c\"").expect("go accepts invalid utf-8 in strings");
        assert_eq!(value, GoValue::string("a\u{fffd}b\u{fffd}\u{fffd}c"));
        assert_eq!(value.to_go_json(), "\"a\u{fffd}b\u{fffd}\u{fffd}c\"");
    }

    #[test]
    fn lone_surrogates_decode_to_replacement() {
        assert_eq!(decode(br#""\ud800x""#), Ok(GoValue::string("\u{fffd}x")));
        assert_eq!(decode(br#""\ud800\u0041""#), Ok(GoValue::string("\u{fffd}A")));
        assert_eq!(decode(br#""\udc00""#), Ok(GoValue::string("\u{fffd}")));
    }

    #[test]
    fn numbers_go_through_float64() {
        assert_eq!(roundtrip("1.0"), "1");
        assert_eq!(roundtrip("2.50"), "2.5");
        assert_eq!(roundtrip("300000"), "300000");
        assert_eq!(roundtrip("12345678901234567890"), "12345678901234567000");
        assert_eq!(roundtrip("9007199254740993"), "9007199254740992");
        assert_eq!(roundtrip("-0"), "-0");
        assert_eq!(roundtrip("0.1"), "0.1");
        assert_eq!(roundtrip("1E2"), "100");
    }

    #[test]
    fn number_notation_switches_at_go_thresholds() {
        assert_eq!(roundtrip("1e20"), "100000000000000000000");
        assert_eq!(roundtrip("1e21"), "1e+21");
        assert_eq!(roundtrip("123456789e20"), "1.23456789e+28");
        assert_eq!(roundtrip("0.000001"), "0.000001");
        assert_eq!(roundtrip("0.0000001"), "1e-7");
        assert_eq!(roundtrip("-1.5e-10"), "-1.5e-10");
        assert_eq!(roundtrip("1e300"), "1e+300");
        assert_eq!(roundtrip("5e-324"), "5e-324");
    }

    #[test]
    fn shortest_digit_ties_round_to_even_like_go() {
        // Exact binary values ...751.125 and ...628.5625: two shortest candidates, Go takes the even one.
        assert_eq!(roundtrip("97259929426751.12"), "97259929426751.12");
        assert_eq!(roundtrip("9643701831628.562"), "9643701831628.562");
        assert_eq!(roundtrip("661436110012588.2"), "661436110012588.2");
    }

    #[test]
    fn numbers_outside_float64_are_an_error_like_go() {
        let error = decode(b"1e400").expect_err("overflow");
        assert!(error.message.contains("cannot unmarshal a number of 5 characters into"), "{error}");
        let long = format!(r#"{{"clientsecret":{{"pin":{}}}}}"#, "9".repeat(320));
        let error = decode(long.as_bytes()).expect_err("overflow");
        assert_eq!(
            error.to_string(),
            "cannot unmarshal a number of 320 characters at key \"pin\" into Go value of type float64 (out of its range) (at byte 23)"
        );
    }

    #[test]
    fn duplicate_keys_last_one_wins() {
        assert_eq!(roundtrip(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
    }

    #[test]
    fn invalid_json_is_rejected_with_a_position() {
        for bad in [
            "", "   ", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "tru", "\"abc", "\"\x01\"", "{} {}", "{'a':1}",
            "\"\\x\"",
        ] {
            assert!(decode(bad.as_bytes()).is_err(), "accepted {bad:?}");
        }
        let error = decode(b"[1, 2 x").expect_err("bad");
        assert_eq!(error.offset, 6);
    }

    #[test]
    fn missing_input_is_unexpected_end_like_go() {
        assert_eq!(decode(b"").expect_err("empty").message, "unexpected end of JSON input");
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert!(decode(deep.as_bytes()).expect_err("too deep").message.contains("depth"));
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(decode(ok.as_bytes()).is_ok());
    }

    #[test]
    fn decode_rune_matches_go_per_byte_semantics() {
        assert_eq!(decode_rune(b"\xe2\x82\xac"), (Some('€'), 3));
        assert_eq!(decode_rune(b"\xe2\x82x"), (None, 1));
        assert_eq!(decode_rune(b"\xc0\x80"), (None, 1)); // overlong
        assert_eq!(decode_rune(b"\xed\xa0\x80"), (None, 1)); // surrogate
        assert_eq!(decode_rune(b"\xf5"), (None, 1));
    }
}
