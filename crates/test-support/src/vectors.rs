//! The shared vectors files at the repository root (`vectors/gadget-v1.json`,
//! `vectors/mobile-v1.json`, `vectors/bridge-v1.json`): each is an object of sections,
//! each section a list of cases. The loader and the typed field readers every vectors
//! test uses; a missing section or field fails the test with the case's name.

use serde_json::Value;

const GADGET: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../vectors/gadget-v1.json"
));
const MOBILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../vectors/mobile-v1.json"
));
const BRIDGE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../vectors/bridge-v1.json"
));

/// The gadget protocol's vectors.
pub fn gadget() -> Value {
    serde_json::from_str(GADGET).expect("vectors/gadget-v1.json is JSON")
}

/// The mobile protocol's vectors.
pub fn mobile() -> Value {
    serde_json::from_str(MOBILE).expect("vectors/mobile-v1.json is JSON")
}

/// The Hermes bridge's line protocol's vectors.
pub fn bridge() -> Value {
    serde_json::from_str(BRIDGE).expect("vectors/bridge-v1.json is JSON")
}

/// The cases of `section`, which must have some.
pub fn cases<'a>(v: &'a Value, section: &str) -> &'a [Value] {
    let cases = v[section]
        .as_array()
        .unwrap_or_else(|| panic!("section {section}"));
    assert!(!cases.is_empty(), "section {section} is empty");
    cases
}

/// The string `field` of `case`.
pub fn s<'a>(case: &'a Value, field: &str) -> &'a str {
    case[field]
        .as_str()
        .unwrap_or_else(|| panic!("{}: {field} is not a string", label(case)))
}

/// The unsigned integer `field` of `case`.
pub fn u(case: &Value, field: &str) -> u64 {
    case[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{}: {field} is not an integer", label(case)))
}

/// The bool `field` of `case`.
pub fn b(case: &Value, field: &str) -> bool {
    case[field]
        .as_bool()
        .unwrap_or_else(|| panic!("{}: {field} is not a bool", label(case)))
}

/// The device key of a gadget case (`key_hex`).
pub fn key(case: &Value) -> [u8; 32] {
    hex::decode(s(case, "key_hex"))
        .unwrap_or_else(|e| panic!("{}: key_hex: {e}", label(case)))
        .try_into()
        .unwrap_or_else(|_| panic!("{}: key_hex is not 32 bytes", label(case)))
}

/// A case's name, or the whole case where it has none (some mobile sections).
fn label(case: &Value) -> String {
    case["name"]
        .as_str()
        .map_or_else(|| case.to_string(), str::to_owned)
}
