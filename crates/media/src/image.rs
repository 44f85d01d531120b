//! Pictures for a device's screen: any common image fitted into its box as RGB565.
//!
//! [`fit_rgb565`] decodes JPEG, PNG, GIF (first frame) or WebP, recognised from the content,
//! and returns pixels the device can blit as they are:
//! - alpha is composited over black, the colour of the screen around the picture;
//! - the picture is shrunk to fit inside the box, keeping its aspect ratio, and never
//!   enlarged (the device centres a small picture; upscaling would only blur it);
//! - the EXIF orientation is applied, so a phone photo taken upright shows upright;
//! - pixels become RGB565 little-endian, `((r & 0xF8) << 8) | ((g & 0xFC) << 3) | (b >> 3)`.
//!
//! The order keeps the work small: alpha is flattened first (a premultiplied picture resizes
//! without dark or coloured fringes), then the picture is resized at its stored orientation
//! into the box turned accordingly, and only the small result is rotated.
//!
//! Shrinking happens in two steps. Averaging blocks of whole pixels takes the picture down to
//! two to four times the target size: every source pixel counts once, so fine patterns cannot
//! alias into moiré, and it is the cheapest filter there is (a 12-megapixel photo would
//! otherwise spend more time in the resize than in decoding). Catmull-Rom then does the rest:
//! a cubic filter that stays sharp where a triangle looks soft on a small screen and rings
//! less than Lanczos. See the crate's benches for the cost.
//!
//! Decoding is bounded: pictures larger than [`MAX_SIDE`] pixels a side or needing more than
//! [`MAX_DECODE_BYTES`] are refused before their pixels are allocated. Sending the result in
//! 4096-byte chunks is the caller's business (`herald_gadget_proto::limits::IMAGE_CHUNK`):
//! `image.pixels.chunks(IMAGE_CHUNK)`.

use std::io::Cursor;

use ::image::error::{ImageError as DecodeError, LimitErrorKind};
use ::image::imageops::{self, FilterType};
use ::image::metadata::Orientation;
use ::image::{DynamicImage, ImageDecoder, ImageReader, Limits, RgbImage};

/// Longest side accepted, in pixels: twice a 48-megapixel phone photo's.
pub const MAX_SIDE: u32 = 16_384;
/// Most memory the decoder may allocate for one picture.
pub const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;

/// A picture ready for the device: `width * height` RGB565 pixels, little-endian, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb565Image {
    /// Width actually produced, at most the box's.
    pub width: u32,
    /// Height actually produced, at most the box's.
    pub height: u32,
    /// Two bytes per pixel, low byte first.
    pub pixels: Vec<u8>,
}

/// Why a picture could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A box with no room for a single pixel.
    #[error("the image box {width}x{height} is empty")]
    EmptyBox {
        /// Box width.
        width: u32,
        /// Box height.
        height: u32,
    },
    /// Not JPEG, PNG, GIF or WebP, or a variant of them the decoder does not handle.
    #[error("unsupported image: {0}")]
    Unsupported(String),
    /// Larger than [`MAX_SIDE`] or [`MAX_DECODE_BYTES`] allow.
    #[error("the image is too large to decode")]
    TooLarge,
    /// Malformed data.
    #[error("corrupt image: {0}")]
    Corrupt(String),
}

/// Decodes `encoded` and fits it inside `max_width` x `max_height` as RGB565 (see the module
/// documentation for every step).
pub fn fit_rgb565(
    encoded: &[u8],
    max_width: u32,
    max_height: u32,
) -> Result<Rgb565Image, ImageError> {
    if max_width == 0 || max_height == 0 {
        return Err(ImageError::EmptyBox {
            width: max_width,
            height: max_height,
        });
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    let mut reader = ImageReader::new(Cursor::new(encoded))
        .with_guessed_format()
        .map_err(|e| ImageError::Corrupt(e.to_string()))?;
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(decode_error)?;
    // A broken EXIF block is no reason to refuse a picture: show it as stored.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let decoded = DynamicImage::from_decoder(decoder).map_err(decode_error)?;

    let flat = over_black(decoded);
    let (box_width, box_height) = if swaps_sides(orientation) {
        (max_height, max_width)
    } else {
        (max_width, max_height)
    };
    let (width, height) = fit_inside(flat.dimensions(), (box_width, box_height));
    let mut oriented = DynamicImage::ImageRgb8(shrink(flat, width, height));
    oriented.apply_orientation(orientation);
    let oriented = oriented.into_rgb8();

    let mut pixels = Vec::with_capacity(2 * oriented.as_raw().len() / 3);
    pixels.extend(oriented.pixels().flat_map(|p| rgb565(p.0).to_le_bytes()));
    Ok(Rgb565Image {
        width: oriented.width(),
        height: oriented.height(),
        pixels,
    })
}

/// Composites any alpha over black; pictures without alpha pass through (no copy for RGB8).
fn over_black(image: DynamicImage) -> RgbImage {
    if !image.color().has_alpha() {
        return image.into_rgb8();
    }
    let rgba = image.into_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let over = |c: u8| ((u16::from(c) * u16::from(a) + 127) / 255) as u8;
        ::image::Rgb([over(r), over(g), over(b)])
    })
}

/// Shrinks `image` to `width` x `height`. Area averaging by a whole factor does the bulk of
/// a large reduction (each source pixel read once, integer arithmetic, and a whole-pixel box
/// cancels the finest patterns exactly); Catmull-Rom does the last factor of two to four, for
/// sharpness.
fn shrink(image: RgbImage, width: u32, height: u32) -> RgbImage {
    if (width, height) == image.dimensions() {
        return image;
    }
    let factor =
        (image.width() / width.saturating_mul(2)).min(image.height() / height.saturating_mul(2));
    let image = if factor >= 2 {
        imageops::thumbnail(&image, image.width() / factor, image.height() / factor)
    } else {
        image
    };
    imageops::resize(&image, width, height, FilterType::CatmullRom)
}

/// The largest size inside `bounds` with the aspect ratio of `size`, but never larger than
/// `size`; each side at least one pixel.
fn fit_inside((width, height): (u32, u32), (max_width, max_height): (u32, u32)) -> (u32, u32) {
    if width <= max_width && height <= max_height {
        return (width, height);
    }
    let (w, h) = (u64::from(width), u64::from(height));
    let (bw, bh) = (u64::from(max_width), u64::from(max_height));
    // Compare the aspect ratios without division: is the picture wider than the box?
    let (fitted_w, fitted_h) = if w * bh >= h * bw {
        (bw, (h * bw + w / 2) / w)
    } else {
        ((w * bh + h / 2) / h, bh)
    };
    // Both are at most the box's sides, which are u32.
    (fitted_w.max(1) as u32, fitted_h.max(1) as u32)
}

fn swaps_sides(orientation: Orientation) -> bool {
    matches!(
        orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    )
}

fn rgb565([r, g, b]: [u8; 3]) -> u16 {
    ((u16::from(r) & 0xF8) << 8) | ((u16::from(g) & 0xFC) << 3) | (u16::from(b) >> 3)
}

fn decode_error(e: DecodeError) -> ImageError {
    match e {
        DecodeError::Limits(limit)
            if matches!(limit.kind(), LimitErrorKind::Unsupported { .. }) =>
        {
            ImageError::Unsupported(limit.to_string())
        }
        DecodeError::Limits(_) => ImageError::TooLarge,
        DecodeError::Unsupported(e) => ImageError::Unsupported(e.to_string()),
        other => ImageError::Corrupt(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb565_packs_the_top_bits() {
        assert_eq!(rgb565([255, 0, 0]), 0xF800);
        assert_eq!(rgb565([0, 255, 0]), 0x07E0);
        assert_eq!(rgb565([0, 0, 255]), 0x001F);
        assert_eq!(rgb565([255, 255, 255]), 0xFFFF);
        assert_eq!(
            rgb565([0x07, 0x03, 0x07]),
            0,
            "bits below the kept ones vanish"
        );
        assert_eq!(rgb565([0x08, 0x04, 0x08]), 0x0821);
    }

    #[test]
    fn fitting_keeps_aspect_never_enlarges_and_keeps_a_pixel() {
        assert_eq!(fit_inside((4000, 3000), (320, 196)), (261, 196));
        assert_eq!(fit_inside((3000, 4000), (320, 196)), (147, 196));
        assert_eq!(fit_inside((1000, 100), (320, 196)), (320, 32));
        assert_eq!(fit_inside((100, 50), (320, 196)), (100, 50));
        assert_eq!(fit_inside((320, 196), (320, 196)), (320, 196));
        assert_eq!(fit_inside((10_000, 1), (320, 196)), (320, 1));
        assert_eq!(fit_inside((1, 10_000), (320, 196)), (1, 196));
        assert_eq!(fit_inside((321, 197), (320, 196)), (319, 196));
        assert_eq!(fit_inside((u32::MAX, u32::MAX), (5, 3)), (3, 3));
    }

    #[test]
    fn quarter_turns_swap_the_box() {
        assert!(swaps_sides(Orientation::Rotate90));
        assert!(swaps_sides(Orientation::Rotate270FlipH));
        assert!(!swaps_sides(Orientation::Rotate180));
        assert!(!swaps_sides(Orientation::FlipHorizontal));
        assert!(!swaps_sides(Orientation::NoTransforms));
    }
}
