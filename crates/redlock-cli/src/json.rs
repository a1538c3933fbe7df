//! Just enough JSON for `--json`: string escaping and an object written field by field.
//! Hand-written so that the CLI needs no serialisation framework for a few flat reports.

use std::fmt::Write;

/// A JSON string literal for `text`, escaped per RFC 8259.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON string for `bytes` read as UTF-8 (invalid sequences replaced), or `null`.
pub(crate) fn bytes_or_null(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "null".into(), |b| string(&String::from_utf8_lossy(b)))
}

/// A number, or `null`.
pub(crate) fn number_or_null(n: Option<u128>) -> String {
    n.map_or_else(|| "null".into(), |n| n.to_string())
}

/// `{"k": v, ...}` from fields whose values are JSON already.
pub(crate) fn object(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = (fields.iter())
        .map(|(k, v)| format!("{}:{v}", string(k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// `[v, ...]` from values that are JSON already.
pub(crate) fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\nd\u{1}é"), r#""a\"b\\c\nd\u0001é""#);
        assert_eq!(bytes_or_null(None), "null");
        assert_eq!(bytes_or_null(Some(b"\xffx")), "\"\u{fffd}x\"");
        let o = object(&[("a", "1".into()), ("b", array(&["null".into()]))]);
        assert_eq!(o, r#"{"a":1,"b":[null]}"#);
    }
}
