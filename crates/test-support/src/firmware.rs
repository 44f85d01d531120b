//! The fake firmware every OTA test pushes: enough of an ESP-IDF application image for
//! the server's checks (`herald_gadget_proto::ota_image`) and the device's.

use herald_gadget_proto::ota_image::{
    APP_DESC_MAGIC, APP_DESC_MAGIC_OFFSET, BOARD_TAG, IMAGE_MAGIC, PROJECT_RANGE, VERSION_RANGE,
};

/// Where [`firmware_image`] puts the `HGBOARD=` tag: just past the application descriptor.
pub const TAG_AT: usize = 500;

/// `filler` made a fake ESP-IDF application image: header, app descriptor (`version`)
/// and `HGBOARD=` tag at [`TAG_AT`], where the checks look; the rest stays as it was.
pub fn firmware_image(board: &str, version: &str, filler: Vec<u8>) -> Vec<u8> {
    firmware_image_tagged_at(board, version, filler, TAG_AT)
}

/// [`firmware_image`] with the board tag at `tag_at` (to put it across a frame boundary).
///
/// Panics if `filler` is too short for the tag, or `version` for its field.
pub fn firmware_image_tagged_at(
    board: &str,
    version: &str,
    mut filler: Vec<u8>,
    tag_at: usize,
) -> Vec<u8> {
    filler[0] = IMAGE_MAGIC;
    filler[APP_DESC_MAGIC_OFFSET..APP_DESC_MAGIC_OFFSET + 4]
        .copy_from_slice(&APP_DESC_MAGIC.to_le_bytes());
    filler[VERSION_RANGE.start..PROJECT_RANGE.end].fill(0);
    filler[VERSION_RANGE][..version.len()].copy_from_slice(version.as_bytes());
    filler[PROJECT_RANGE][..11].copy_from_slice(b"herald-test");
    let tag = [BOARD_TAG, board.as_bytes(), b"\0"].concat();
    filler[tag_at..tag_at + tag.len()].copy_from_slice(&tag);
    filler
}

#[cfg(test)]
mod tests {
    use herald_gadget_proto::ota_image::inspect_image;

    use super::*;

    #[test]
    fn the_checks_read_what_was_written() {
        let image = firmware_image("esp32s3-test", "1.2.3", vec![7; 1024]);
        let info = inspect_image(&image).unwrap();
        assert_eq!(info.version, "1.2.3");
        assert_eq!(info.project, "herald-test");
        assert_eq!(info.board.as_deref(), Some("esp32s3-test"));
        assert_eq!(info.size, 1024);
        let moved = firmware_image_tagged_at("stick", "2.0.0", vec![0; 8192], 4090);
        assert_eq!(&moved[4090..4098], BOARD_TAG);
        assert_eq!(
            inspect_image(&moved).unwrap().board.as_deref(),
            Some("stick")
        );
    }
}
