//! WAV inspection of voice notes phones send, and the shaping of agent text for screens.

use std::time::Duration;

use herald_media::text::{collapse_whitespace, fold_ascii, shape_reply, Charset};
use herald_media::wav;

/// A voice note's header: what `inspect` reports must be possible for these bytes.
pub fn wav_inspect(data: &[u8]) {
    let Ok(info) = wav::inspect(data) else {
        return;
    };
    assert!(info.rate > 0 && info.channels > 0 && info.bits > 0);
    // The data chunk cannot hold more frames than the whole file has bytes.
    let frame = u128::from(info.channels) * u128::from(info.bits).div_ceil(8);
    let most = data.len() as u128 / frame * 1_000_000_000 / u128::from(info.rate);
    assert!(info.duration <= Duration::from_nanos(u64::try_from(most).unwrap_or(u64::MAX)));
}

/// Any text an agent might write, shaped for both charsets: the result must keep the
/// promises `shape_reply` makes, and each step must be stable when run again.
pub fn text_shaping(data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    for charset in [Charset::Utf8, Charset::Ascii] {
        let out = shape_reply(&input, charset);
        if charset == Charset::Ascii {
            assert!(out
                .bytes()
                .all(|b| b == b'\n' || (b' '..=b'~').contains(&b)));
        }
        assert!(!out.chars().any(|c| c != '\n' && c.is_control()), "{out:?}");
        assert!(!out.starts_with('\n') && !out.ends_with('\n'), "{out:?}");
        assert!(!out.contains("\n\n\n") && !out.contains("  "), "{out:?}");
        assert!(out.lines().all(|l| !l.ends_with(' ')), "{out:?}");
        assert_eq!(collapse_whitespace(&out), out);
    }
    let folded = fold_ascii(&input);
    assert!(folded
        .bytes()
        .all(|b| b == b'\n' || (b' '..=b'~').contains(&b)));
    assert_eq!(fold_ascii(&folded), folded);
}
