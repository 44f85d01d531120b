//! Fitting pictures into a device's box as RGB565: every rule of the protocol, on real files
//! and on pictures made here.

use std::io::Cursor;
use std::path::PathBuf;

use herald_media::image::{fit_rgb565, ImageError, Rgb565Image, MAX_SIDE};
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::{ImageEncoder, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(path).unwrap()
}

fn png_rgba(image: &RgbaImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, ImageFormat::Png).unwrap();
    out.into_inner()
}

fn png_rgb(image: &RgbImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, ImageFormat::Png).unwrap();
    out.into_inner()
}

/// A minimal big-endian EXIF (TIFF) block holding only an orientation tag.
fn exif_orientation(value: u8) -> Vec<u8> {
    let mut tiff = b"MM\x00\x2a\x00\x00\x00\x08".to_vec();
    tiff.extend_from_slice(&[0, 1]); // one entry
    tiff.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, value, 0, 0]);
    tiff.extend_from_slice(&[0, 0, 0, 0]); // no next directory
    tiff
}

fn pixel(image: &Rgb565Image, x: u32, y: u32) -> u16 {
    let i = 2 * (y * image.width + x) as usize;
    u16::from_le_bytes([image.pixels[i], image.pixels[i + 1]])
}

/// The 8-bit channels an RGB565 pixel approximates (low bits zero).
fn channels(p: u16) -> [u8; 3] {
    [
        ((p >> 8) & 0xF8) as u8,
        ((p >> 3) & 0xFC) as u8,
        ((p << 3) & 0xF8) as u8,
    ]
}

#[test]
fn pure_red_is_f800_low_byte_first() {
    let red = RgbImage::from_pixel(3, 2, Rgb([255, 0, 0]));
    let out = fit_rgb565(&png_rgb(&red), 320, 196).unwrap();
    assert_eq!((out.width, out.height), (3, 2));
    assert_eq!(out.pixels.len(), 3 * 2 * 2);
    assert!(out.pixels.chunks(2).all(|p| p == [0x00, 0xF8]));
}

#[test]
fn rows_are_row_major_and_channels_land_in_their_bits() {
    let mut image = RgbImage::new(2, 2);
    image.put_pixel(0, 0, Rgb([255, 0, 0]));
    image.put_pixel(1, 0, Rgb([0, 255, 0]));
    image.put_pixel(0, 1, Rgb([0, 0, 255]));
    image.put_pixel(1, 1, Rgb([255, 255, 255]));
    let out = fit_rgb565(&png_rgb(&image), 320, 196).unwrap();
    assert_eq!(
        [
            pixel(&out, 0, 0),
            pixel(&out, 1, 0),
            pixel(&out, 0, 1),
            pixel(&out, 1, 1)
        ],
        [0xF800, 0x07E0, 0x001F, 0xFFFF]
    );
}

#[test]
fn alpha_is_composited_over_black() {
    let mut image = RgbaImage::new(3, 1);
    image.put_pixel(0, 0, Rgba([255, 255, 255, 128]));
    image.put_pixel(1, 0, Rgba([255, 0, 0, 0]));
    image.put_pixel(2, 0, Rgba([0, 255, 0, 255]));
    let out = fit_rgb565(&png_rgba(&image), 320, 196).unwrap();
    // Half-transparent white is mid grey (128, 128, 128); invisible red is black.
    assert_eq!(pixel(&out, 0, 0), 0x8410);
    assert_eq!(pixel(&out, 1, 0), 0x0000);
    assert_eq!(pixel(&out, 2, 0), 0x07E0);
}

#[test]
fn a_small_picture_is_never_enlarged() {
    let image = RgbImage::from_pixel(10, 5, Rgb([9, 9, 9]));
    let out = fit_rgb565(&png_rgb(&image), 320, 196).unwrap();
    assert_eq!((out.width, out.height), (10, 5));
}

#[test]
fn a_large_picture_fits_inside_keeping_its_aspect() {
    for ((w, h), fitted) in [
        ((400, 300), (261, 196)),
        ((300, 400), (147, 196)),
        ((1000, 100), (320, 32)),
        ((7, 3), (4, 2)),
    ] {
        let (bw, bh) = if w == 7 { (4, 4) } else { (320, 196) };
        let image = RgbImage::from_fn(w, h, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 0]));
        let out = fit_rgb565(&png_rgb(&image), bw, bh).unwrap();
        assert_eq!((out.width, out.height), fitted, "{w}x{h}");
        assert_eq!(out.pixels.len(), (2 * fitted.0 * fitted.1) as usize);
    }
}

#[test]
fn a_uniform_colour_survives_resizing() {
    // The filter's weights sum to one: no dark edges, no ringing on flat areas.
    let image = RgbImage::from_pixel(999, 333, Rgb([200, 100, 50]));
    let out = fit_rgb565(&png_rgb(&image), 320, 196).unwrap();
    assert_eq!((out.width, out.height), (320, 107));
    let expected = ((200u16 & 0xF8) << 8) | ((100 & 0xFC) << 3) | (50 >> 3);
    assert!(out
        .pixels
        .chunks(2)
        .all(|p| u16::from_le_bytes([p[0], p[1]]) == expected));
}

#[test]
fn fine_patterns_average_out_instead_of_aliasing() {
    // One-pixel checks, reduced 2.2 to 4.7 times: any pixel dropped or picked instead of
    // averaged shows as black or white bands (moiré). Properly filtered it is an even grey.
    for (w, h) in [(700, 429), (960, 588), (1500, 918)] {
        let stripes = RgbImage::from_fn(w, h, |x, y| {
            let v = if (x + y) % 2 == 0 { 255 } else { 0 };
            Rgb([v, v, v])
        });
        let out = fit_rgb565(&png_rgb(&stripes), 320, 196).unwrap();
        for p in out.pixels.chunks(2) {
            let [r, g, b] = channels(u16::from_le_bytes([p[0], p[1]]));
            for c in [r, g, b] {
                assert!((112..=144).contains(&c), "{w}x{h}: channel {c}");
            }
        }
    }
}

#[test]
fn odd_sizes_and_single_pixels() {
    for (w, h, bw, bh) in [
        (1, 1, 320, 196),
        (3, 1000, 320, 196),
        (1001, 3, 5, 5),
        (17, 9, 17, 9),
    ] {
        let image = RgbImage::from_pixel(w, h, Rgb([0, 0, 255]));
        let out = fit_rgb565(&png_rgb(&image), bw, bh).unwrap();
        assert!(out.width >= 1 && out.height >= 1);
        assert!(out.width <= bw.min(w) && out.height <= bh.min(h), "{w}x{h}");
        assert_eq!(out.pixels.len(), (2 * out.width * out.height) as usize);
    }
}

#[test]
fn exif_orientation_six_turns_a_wide_jpeg_upright() {
    // 2x1 stored, "rotate 90 degrees clockwise to display": 1x2 on screen.
    let mut jpeg = Vec::new();
    let mut encoder = JpegEncoder::new_with_quality(&mut jpeg, 95);
    encoder.set_exif_metadata(exif_orientation(6)).unwrap();
    encoder
        .write_image(
            &[255, 0, 0, 0, 0, 255],
            2,
            1,
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    let out = fit_rgb565(&jpeg, 320, 196).unwrap();
    assert_eq!((out.width, out.height), (1, 2));
}

#[test]
fn exif_orientation_from_a_camera_style_file() {
    // Written by ImageMagick and exiftool: 40x20, left half red, right half blue, orientation
    // 6. Upright it is 20x40 with red on top.
    let jpeg = fixture("exif_orientation6_40x20.jpg");
    let out = fit_rgb565(&jpeg, 320, 196).unwrap();
    assert_eq!((out.width, out.height), (20, 40));
    let [r, _, b] = channels(pixel(&out, 10, 5));
    assert!(r > 200 && b < 60, "top is red: {r} {b}");
    let [r, _, b] = channels(pixel(&out, 10, 35));
    assert!(b > 200 && r < 60, "bottom is blue: {r} {b}");

    // The box is matched against the upright picture: 20x40 into 10x10 is 5x10.
    let small = fit_rgb565(&jpeg, 10, 10).unwrap();
    assert_eq!((small.width, small.height), (5, 10));
}

#[test]
fn exif_orientation_in_a_png_with_alpha() {
    let mut image = RgbaImage::from_pixel(4, 2, Rgba([0, 0, 0, 0]));
    image.put_pixel(0, 0, Rgba([0, 255, 0, 255]));
    let mut png = Vec::new();
    let mut encoder = PngEncoder::new(&mut png);
    encoder.set_exif_metadata(exif_orientation(6)).unwrap();
    encoder
        .write_image(image.as_raw(), 4, 2, image::ExtendedColorType::Rgba8)
        .unwrap();
    let out = fit_rgb565(&png, 320, 196).unwrap();
    assert_eq!((out.width, out.height), (2, 4));
    // Turned clockwise, the top-left corner goes to the top-right.
    assert_eq!(pixel(&out, 1, 0), 0x07E0);
    assert_eq!(pixel(&out, 0, 0), 0x0000);
}

#[test]
fn gif_shows_its_first_frame() {
    // Two frames: red, then green.
    let out = fit_rgb565(&fixture("two_frames_8x6.gif"), 320, 196).unwrap();
    assert_eq!((out.width, out.height), (8, 6));
    assert!(out.pixels.chunks(2).all(|p| p == [0x00, 0xF8]));
}

#[test]
fn lossy_webp_with_alpha() {
    // cwebp: 16x12 white at 50% alpha.
    let out = fit_rgb565(&fixture("half_white_16x12.webp"), 320, 196).unwrap();
    assert_eq!((out.width, out.height), (16, 12));
    for p in out.pixels.chunks(2) {
        let [r, g, b] = channels(u16::from_le_bytes([p[0], p[1]]));
        assert!((120..=136).contains(&r) && (120..=136).contains(&g) && (120..=136).contains(&b));
    }
}

#[test]
fn an_empty_box_is_refused() {
    let png = png_rgb(&RgbImage::new(2, 2));
    assert!(matches!(
        fit_rgb565(&png, 0, 196),
        Err(ImageError::EmptyBox {
            width: 0,
            height: 196
        })
    ));
    assert!(matches!(
        fit_rgb565(&png, 320, 0),
        Err(ImageError::EmptyBox { .. })
    ));
}

#[test]
fn oversized_pictures_are_refused_before_decoding() {
    // Tiny when compressed, beyond MAX_SIDE when decoded.
    let png = png_rgb(&RgbImage::new(MAX_SIDE + 1, 1));
    assert!(matches!(
        fit_rgb565(&png, 320, 196),
        Err(ImageError::TooLarge)
    ));
}

#[test]
fn garbage_and_cut_files_are_errors_not_panics() {
    let noise: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(40_503) >> 5) as u8)
        .collect();
    assert!(matches!(
        fit_rgb565(&noise, 320, 196),
        Err(ImageError::Unsupported(_))
    ));
    assert!(matches!(
        fit_rgb565(&[], 320, 196),
        Err(ImageError::Unsupported(_))
    ));

    let png = png_rgb(&RgbImage::from_fn(64, 64, |x, y| {
        Rgb([x as u8, y as u8, 7])
    }));
    assert!(matches!(
        fit_rgb565(&png[..png.len() / 2], 320, 196),
        Err(ImageError::Corrupt(_))
    ));
}

#[test]
fn damaged_files_never_panic() {
    let mut jpeg = Vec::new();
    RgbImage::from_fn(64, 48, |x, y| Rgb([x as u8 * 4, y as u8 * 5, 90]))
        .write_to(&mut Cursor::new(&mut jpeg), ImageFormat::Jpeg)
        .unwrap();
    let files = [
        jpeg,
        fixture("exif_orientation6_40x20.jpg"),
        fixture("two_frames_8x6.gif"),
        fixture("half_white_16x12.webp"),
        png_rgba(&RgbaImage::from_fn(30, 20, |x, y| {
            Rgba([x as u8, y as u8, 3, 200])
        })),
    ];
    for original in files {
        for step in 0..24usize {
            let mut bytes = original.clone();
            let at = (step * bytes.len() / 24 + step).min(bytes.len() - 1);
            let end = (at + 8).min(bytes.len());
            for b in &mut bytes[at..end] {
                *b ^= 0xA5;
            }
            // Either a picture inside the box or an error: both are fine, a panic is not.
            if let Ok(out) = fit_rgb565(&bytes, 320, 196) {
                assert_eq!(out.pixels.len(), (2 * out.width * out.height) as usize);
            }
        }
    }
}
