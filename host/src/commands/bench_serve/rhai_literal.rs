//! Rhai literals for the generated scenario: strings, floats and parameter lines.

use std::fmt::Write as _;

/// A Rhai string literal.
pub fn rhai_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Rhai float literal: always with a decimal point, never an exponent.
pub fn rhai_float(v: f64) -> String {
    let text = format!("{v}");
    match text.contains('.') {
        true => text,
        false => format!("{text}.0"),
    }
}

/// One parameter line of `describe()`.
pub fn param(name: &str, value: String, help: &str) -> String {
    format!(
        "            #{{ name: {}, value: {value}, help: {} }},\n",
        rhai_str(name),
        rhai_str(help)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_rhai() {
        assert_eq!(rhai_str("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
        assert_eq!(rhai_float(4.0), "4.0");
        assert_eq!(rhai_float(0.25), "0.25");
        assert_eq!(rhai_float(1e-7), "0.0000001");
    }
}
