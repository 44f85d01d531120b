//! Checks shared by the two JSON protocols.

use serde_json::Value;

/// Equal as JSON, except that floats may differ in their last bits: serde_json's default
/// float parsing is not exact, so a number written and read back can move by one ulp.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y
                || match (x.as_f64(), y.as_f64()) {
                    (Some(p), Some(q)) if x.is_f64() && y.is_f64() => {
                        (p - q).abs() <= 4.0 * f64::EPSILON * p.abs().max(q.abs())
                    }
                    _ => false,
                }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// How deeply arrays and objects nest in `v`; a scalar is 0.
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The depth scan both decoders run first must never pass text that nests deeper than
/// it allows: serde would then recurse on hostile input.
pub fn depth_scan_is_sound(text: &str, max: usize) {
    if herald_json_depth::check(text.as_bytes(), max).is_err() {
        return;
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        assert!(depth(&value) <= max, "depth scan passed {text:?}");
    }
}

/// The longest error text a decoder may produce for one frame: errors go back to the
/// peer and into logs, so one must never echo a large part of a hostile frame.
pub const MAX_ERROR_TEXT: usize = 512;

/// Checks an error's text against [`MAX_ERROR_TEXT`].
pub fn bounded_error(what: &str, error: &impl std::fmt::Display) {
    let text = error.to_string();
    assert!(
        text.len() <= MAX_ERROR_TEXT,
        "{what} error is {} bytes: {:?}…",
        text.len(),
        text.chars().take(200).collect::<String>()
    );
}
