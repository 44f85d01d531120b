//! What a phone is sent besides plain frames: long text in chunks, files as `media`
//! frames, and the port's choice for a card's answer. Pure functions and values.

use herald_mobile_proto::{
    self as proto, limits, MediaDown, MediaKindDown, PromptKind, ServerFrame,
};
use herald_port::Choice;

/// The port's choice for an answer that [`proto::PromptCard::resolve`] validated.
pub(super) fn choice_of(kind: PromptKind, option_id: &str, response: Option<&str>) -> Choice {
    match (kind, option_id) {
        (_, "once") => Choice::Once,
        (_, "session") => Choice::Session,
        (_, "always") => Choice::Always,
        (_, "deny") => Choice::Deny,
        (PromptKind::Clarify, proto::CLARIFY_OTHER) => {
            Choice::Other(response.unwrap_or_default().to_owned())
        }
        (PromptKind::Clarify, id) => id
            .strip_prefix('c')
            .and_then(|n| n.parse().ok())
            .map_or(Choice::Cancel, Choice::Option),
        _ => Choice::Cancel,
    }
}

/// Split `text` into pieces of at most `max` characters, preferring to break after a
/// newline or a space in the last quarter of a piece.
pub(super) fn split_chunks(text: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return vec![text.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + max).min(chars.len());
        if end < chars.len() {
            let floor = start + max * 3 / 4;
            if let Some(cut) = (floor..end)
                .rev()
                .find(|&i| chars[i] == '\n' || chars[i] == ' ')
            {
                end = cut + 1;
            }
        }
        chunks.push(chars[start..end].iter().collect());
        start = end;
    }
    chunks
}

/// A file on its way to a phone as `media` frames of at most
/// [`limits::MEDIA_CHUNK_BYTES`] each, built one at a time.
#[derive(Debug)]
pub struct FileDown {
    id: String,
    kind: MediaKindDown,
    mime: String,
    filename: Option<String>,
    caption: Option<String>,
    size: u64,
    /// At least one: an empty file is one empty frame.
    pub parts: u32,
}

impl FileDown {
    pub(super) fn new(
        id: String,
        kind: MediaKindDown,
        mime: String,
        filename: Option<String>,
        caption: Option<String>,
        size: u64,
    ) -> Self {
        let parts = size.div_ceil(limits::MEDIA_CHUNK_BYTES as u64).max(1);
        FileDown {
            id,
            kind,
            mime,
            filename,
            caption,
            size,
            parts: u32::try_from(parts).unwrap_or(u32::MAX),
        }
    }

    /// The length of part `part`.
    pub fn part_len(&self, part: u32) -> u64 {
        let chunk = limits::MEDIA_CHUNK_BYTES as u64;
        chunk.min(self.size.saturating_sub(u64::from(part) * chunk))
    }

    /// Part `part`'s frame, carrying `piece`.
    pub fn frame(&self, part: u32, piece: &[u8]) -> ServerFrame {
        ServerFrame::Media(MediaDown {
            id: self.id.clone(),
            kind: self.kind,
            mime: self.mime.clone(),
            filename: self.filename.clone(),
            caption: if part == 0 {
                self.caption.clone()
            } else {
                None
            },
            part,
            parts: self.parts,
            final_: part + 1 == self.parts,
            size: self.size,
            data: Some(proto::encode_base64(piece)),
            url: None,
        })
    }
}

/// The MIME type for a file name, by its extension.
pub(super) fn mime_for(filename: Option<&str>) -> String {
    let extension = filename
        .and_then(|f| f.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "mp4" => "video/mp4",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_the_limit_and_prefer_spaces() {
        assert_eq!(split_chunks("short", 10), ["short"]);
        let text = "aaaa bbbb cccc dddd";
        let chunks = split_chunks(text, 10);
        assert!(chunks.iter().all(|c| c.chars().count() <= 10));
        assert_eq!(chunks.concat(), text);
        assert_eq!(chunks[0], "aaaa bbbb ");
        let unbroken = "x".repeat(25);
        assert_eq!(split_chunks(&unbroken, 10).len(), 3);
        let wide = "é".repeat(21);
        let chunks = split_chunks(&wide, 10);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), wide);
    }

    #[test]
    fn answers_map_onto_the_ports_choices() {
        assert_eq!(
            choice_of(PromptKind::ExecApproval, "session", None),
            Choice::Session
        );
        assert_eq!(
            choice_of(PromptKind::Confirm, "cancel", None),
            Choice::Cancel
        );
        assert_eq!(
            choice_of(PromptKind::Clarify, "c2", Some("B")),
            Choice::Option(2)
        );
        assert_eq!(
            choice_of(PromptKind::Clarify, "other", Some("mine")),
            Choice::Other("mine".into())
        );
    }

    #[test]
    fn files_become_chunked_media_frames() {
        let bytes = vec![7u8; limits::MEDIA_CHUNK_BYTES + 5];
        let size = bytes.len() as u64;
        let file = FileDown::new(
            "f1".into(),
            MediaKindDown::Image,
            "image/png".into(),
            None,
            Some("c".into()),
            size,
        );
        assert_eq!(file.parts, 2);
        assert_eq!(
            (file.part_len(0), file.part_len(1)),
            (limits::MEDIA_CHUNK_BYTES as u64, 5)
        );
        let pieces = proto::media_pieces(&bytes);
        let ServerFrame::Media(first) = file.frame(0, pieces[0]) else {
            panic!()
        };
        let ServerFrame::Media(last) = file.frame(1, pieces[1]) else {
            panic!()
        };
        assert!(!first.final_ && last.final_);
        assert_eq!((first.id.as_str(), last.size), (last.id.as_str(), size));
        assert_eq!((first.caption.as_deref(), last.caption), (Some("c"), None));
        let kind = MediaKindDown::Document;
        let empty = FileDown::new("f2".into(), kind, "text/plain".into(), None, None, 0);
        assert_eq!(empty.parts, 1, "an empty file is one frame");
        assert_eq!(mime_for(Some("a.JPG")), "image/jpeg");
        assert_eq!(mime_for(None), "application/octet-stream");
    }
}
