//! The bodies of Herald's fuzz targets: one function per parser a peer can reach.
//!
//! The libFuzzer binaries in `fuzz/fuzz_targets/` (nightly) and the replay test in
//! `tests/replay.rs` (stable) call these same functions, so a crash found by one is
//! reproduced by the other. Each function returns quietly on input the parser rightly
//! refuses and panics when a parser panics or breaks one of the properties checked here.

mod bridge;
mod gadget;
mod json;
mod media;
mod mobile;
mod upload;

pub use bridge::bridge_line;
pub use gadget::{gadget_frame, gadget_text, ota_image};
pub use media::{text_shaping, wav_inspect};
pub use mobile::mobile_text;
pub use upload::mobile_upload;

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// Every target by the name of its binary and of its `seeds/` and `regressions/` folders.
pub const TARGETS: &[(&str, Target)] = &[
    ("gadget_text", gadget_text),
    ("gadget_frame", gadget_frame),
    ("ota_image", ota_image),
    ("mobile_text", mobile_text),
    ("mobile_upload", mobile_upload),
    ("wav_inspect", wav_inspect),
    ("text_shaping", text_shaping),
    ("bridge_line", bridge_line),
];
