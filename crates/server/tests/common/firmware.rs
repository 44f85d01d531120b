//! The fake firmware every OTA test pushes, shared by the server's and herald's tests.

use herald_gadget_proto::ota_image::{APP_DESC_MAGIC, IMAGE_MAGIC};

/// `filler` made a fake ESP-IDF application image: header, app descriptor (`version`)
/// and `HGBOARD=` tag where the checks look; the rest stays as it was.
pub fn firmware_image(board: &str, version: &str, mut filler: Vec<u8>) -> Vec<u8> {
    filler[0] = IMAGE_MAGIC;
    filler[32..36].copy_from_slice(&APP_DESC_MAGIC.to_le_bytes());
    filler[48..112].fill(0);
    filler[48..48 + version.len()].copy_from_slice(version.as_bytes());
    filler[80..91].copy_from_slice(b"herald-test");
    let tag = format!("HGBOARD={board}\0");
    filler[500..500 + tag.len()].copy_from_slice(tag.as_bytes());
    filler
}
