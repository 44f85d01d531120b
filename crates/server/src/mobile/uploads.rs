//! Reassembly of uploaded media, within the protocol's limits.
//!
//! A phone sends a file in one `media` frame or in chunks that share an `id`. Chunks may
//! arrive in any order and may be resent after a reconnect; a series is handed on only
//! when every part is there. Everything held is bounded: at most
//! [`limits::MAX_OPEN_UPLOADS`] series and `max_bytes` in all per device, and an
//! [`UploadBudget`] shared by every phone caps the bytes per user and in all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use herald_mobile_proto::{limits, MediaKind, MediaUp};

/// A complete file.
#[derive(Debug, PartialEq)]
pub(crate) struct Upload {
    pub id: String,
    pub kind: MediaKind,
    pub mime: Option<String>,
    pub filename: Option<String>,
    pub caption: Option<String>,
    /// The file's bytes in order, as the chunks brought them (one for a single frame).
    pub parts: Vec<Vec<u8>>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Accepted {
    /// More parts are needed.
    Partial,
    /// This part was already here (a resend); nothing changed.
    Duplicate,
    Complete(Upload),
}

/// Why a chunk was refused; the series it belonged to is dropped.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum UploadError {
    #[error("{0}")]
    TooBig(String),
    #[error("{0}")]
    BadFrame(String),
}

struct Series {
    kind: MediaKind,
    mime: Option<String>,
    filename: Option<String>,
    caption: Option<String>,
    parts: u32,
    chunks: BTreeMap<u32, Vec<u8>>,
    bytes: usize,
}

/// Unfinished uploads one user's phones may hold together.
pub(crate) const USER_UPLOAD_BYTES: usize = 32 * 1024 * 1024;
/// Unfinished uploads all phones may hold together.
pub(crate) const ALL_UPLOAD_BYTES: usize = 256 * 1024 * 1024;

/// The bytes of unfinished uploads held for every phone, per user and in all, so that
/// many device ids or many users cannot together hold more than the server can spare.
pub(crate) struct UploadBudget {
    per_user: usize,
    total: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    users: HashMap<String, usize>,
}

impl Default for UploadBudget {
    fn default() -> Self {
        UploadBudget::new(USER_UPLOAD_BYTES, ALL_UPLOAD_BYTES)
    }
}

impl UploadBudget {
    pub(crate) fn new(per_user: usize, total: usize) -> Self {
        UploadBudget {
            per_user,
            total,
            held: Mutex::new(Held::default()),
        }
    }

    fn reserve(&self, user: &str, bytes: usize) -> Result<(), UploadError> {
        let mut held = self.lock();
        let mine = held.users.get(user).copied().unwrap_or(0);
        if mine + bytes > self.per_user {
            return Err(UploadError::TooBig(format!(
                "more than {} bytes of unfinished uploads from this user's devices",
                self.per_user
            )));
        }
        if held.total + bytes > self.total {
            return Err(UploadError::TooBig(
                "the server holds too many unfinished uploads; try again shortly".into(),
            ));
        }
        held.total += bytes;
        *held.users.entry(user.to_owned()).or_default() += bytes;
        Ok(())
    }

    fn release(&self, user: &str, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut held = self.lock();
        held.total = held.total.saturating_sub(bytes);
        if let Some(mine) = held.users.get_mut(user) {
            *mine = mine.saturating_sub(bytes);
            if *mine == 0 {
                held.users.remove(user);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // Counts are updated whole under the lock; a panic elsewhere leaves them valid.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One phone's unfinished uploads; what they hold is drawn from the user's budget.
pub(crate) struct Uploads {
    open: HashMap<String, Series>,
    buffered: usize,
    max_bytes: usize,
    budget: Arc<UploadBudget>,
    /// Whose budget the held bytes count against.
    user: String,
}

impl Drop for Uploads {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Uploads {
    pub(crate) fn new(max_bytes: usize, budget: Arc<UploadBudget>) -> Self {
        Uploads {
            open: HashMap::new(),
            buffered: 0,
            max_bytes,
            budget,
            user: String::new(),
        }
    }

    /// Count what comes from now on against `user`'s budget; anything unfinished is
    /// dropped.
    pub(crate) fn set_user(&mut self, user: &str) {
        if self.user != user {
            self.clear();
            user.clone_into(&mut self.user);
        }
    }

    pub(crate) fn accept(&mut self, frame: MediaUp) -> Result<Accepted, UploadError> {
        let data = frame
            .bytes()
            .map_err(|e| UploadError::BadFrame(format!("media {}: {e}", frame.id)))?;
        if frame.parts <= 1 {
            if data.len() > self.max_bytes {
                return Err(too_big(data.len(), self.max_bytes));
            }
            return Ok(Accepted::Complete(Upload {
                id: frame.id,
                kind: frame.kind,
                mime: frame.mime,
                filename: frame.filename,
                caption: frame.caption,
                parts: vec![data],
            }));
        }
        let result = self.add_chunk(&frame, data);
        if result.is_err() {
            self.drop_series(&frame.id);
        }
        result
    }

    fn add_chunk(&mut self, frame: &MediaUp, data: Vec<u8>) -> Result<Accepted, UploadError> {
        if !self.open.contains_key(&frame.id) && self.open.len() >= limits::MAX_OPEN_UPLOADS {
            return Err(UploadError::TooBig(format!(
                "more than {} unfinished uploads",
                limits::MAX_OPEN_UPLOADS
            )));
        }
        if frame.part + 1 < frame.parts && data.len() < limits::MIN_CHUNK_BYTES {
            return Err(UploadError::BadFrame(format!(
                "chunks other than the last must hold at least {} bytes",
                limits::MIN_CHUNK_BYTES
            )));
        }
        let series = self.open.entry(frame.id.clone()).or_insert_with(|| Series {
            kind: frame.kind,
            mime: frame.mime.clone(),
            filename: frame.filename.clone(),
            caption: frame.caption.clone(),
            parts: frame.parts,
            chunks: BTreeMap::new(),
            bytes: 0,
        });
        if series.parts != frame.parts || series.kind != frame.kind {
            return Err(UploadError::BadFrame(format!(
                "media {}: parts or kind changed between chunks",
                frame.id
            )));
        }
        if series.chunks.contains_key(&frame.part) {
            return Ok(Accepted::Duplicate);
        }
        // The first part names the file, whenever it arrives (a resend after a
        // reconnect can come before it).
        if frame.part == 0 {
            series.mime.clone_from(&frame.mime);
            series.filename.clone_from(&frame.filename);
            series.caption.clone_from(&frame.caption);
        }
        if series.bytes + data.len() > self.max_bytes {
            return Err(too_big(series.bytes + data.len(), self.max_bytes));
        }
        if self.buffered + data.len() > self.max_bytes {
            return Err(UploadError::TooBig(format!(
                "more than {} bytes of unfinished uploads",
                self.max_bytes
            )));
        }
        self.budget.reserve(&self.user, data.len())?;
        series.bytes += data.len();
        self.buffered += data.len();
        series.chunks.insert(frame.part, data);
        if series.chunks.len() < series.parts as usize {
            return Ok(Accepted::Partial);
        }
        let Some(series) = self.open.remove(&frame.id) else {
            return Ok(Accepted::Partial);
        };
        self.buffered -= series.bytes;
        self.budget.release(&self.user, series.bytes);
        Ok(Accepted::Complete(Upload {
            id: frame.id.clone(),
            kind: series.kind,
            mime: series.mime,
            filename: series.filename,
            caption: series.caption,
            // Kept apart: a 4 MiB copy per upload saved; they are written one after another.
            parts: series.chunks.into_values().collect(),
        }))
    }

    fn drop_series(&mut self, id: &str) {
        if let Some(series) = self.open.remove(id) {
            self.buffered -= series.bytes;
            self.budget.release(&self.user, series.bytes);
        }
    }

    /// Forget every unfinished series (the phone disconnected).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
        self.budget.release(&self.user, self.buffered);
        self.buffered = 0;
    }
}

fn too_big(len: usize, max: usize) -> UploadError {
    UploadError::TooBig(format!("the file is {len} bytes; the limit is {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_mobile_proto::encode_base64;

    fn chunk(id: &str, part: u32, parts: u32, len: usize) -> MediaUp {
        MediaUp {
            id: id.into(),
            kind: MediaKind::Document,
            mime: Some("application/pdf".into()),
            filename: Some("a.pdf".into()),
            caption: None,
            data: encode_base64(&vec![part as u8; len]),
            part,
            parts,
        }
    }

    #[test]
    fn reassembles_in_any_order_and_ignores_resends() {
        let mut up = Uploads::new(1 << 20, Arc::default());
        assert_eq!(up.accept(chunk("m", 2, 3, 10)).unwrap(), Accepted::Partial);
        assert_eq!(
            up.accept(chunk("m", 0, 3, 4096)).unwrap(),
            Accepted::Partial
        );
        assert_eq!(
            up.accept(chunk("m", 0, 3, 4096)).unwrap(),
            Accepted::Duplicate
        );
        let Accepted::Complete(file) = up.accept(chunk("m", 1, 3, 4096)).unwrap() else {
            panic!("not complete")
        };
        let bytes = file.parts.concat();
        assert_eq!(bytes.len(), 4096 * 2 + 10);
        assert_eq!(bytes[0], 0);
        assert_eq!(bytes[4096], 1);
        assert_eq!(bytes[8192], 2);
        assert_eq!(up.buffered, 0);
    }

    #[test]
    fn limits_are_enforced() {
        let mut up = Uploads::new(20_000, Arc::default());
        assert!(matches!(
            up.accept(chunk("one", 0, 1, 20_001)),
            Err(UploadError::TooBig(_))
        ));
        assert!(matches!(
            up.accept(chunk("small", 0, 2, 100)),
            Err(UploadError::BadFrame(_))
        ));
        for i in 0..8 {
            up.accept(chunk(&format!("s{i}"), 0, 2, 1)).ok();
        }
        // Small last chunks are fine; eight series are open now.
        for i in 0..8 {
            assert_eq!(
                up.accept(chunk(&format!("s{i}"), 1, 2, 1)).unwrap(),
                Accepted::Partial
            );
        }
        assert!(matches!(
            up.accept(chunk("ninth", 1, 2, 1)),
            Err(UploadError::TooBig(_))
        ));
        up.clear();
        assert_eq!(
            up.accept(chunk("a", 0, 3, 8000)).unwrap(),
            Accepted::Partial
        );
        assert_eq!(
            up.accept(chunk("b", 0, 3, 8000)).unwrap(),
            Accepted::Partial
        );
        // Over the per-device buffer: the offending series is dropped, the other stays.
        assert!(matches!(
            up.accept(chunk("c", 0, 3, 8000)),
            Err(UploadError::TooBig(_))
        ));
        assert_eq!(up.buffered, 16_000);
        assert!(matches!(
            up.accept(chunk("a", 1, 4, 8000)),
            Err(UploadError::BadFrame(_))
        ));
        assert_eq!(up.buffered, 8_000);
    }

    #[test]
    fn the_first_part_names_the_file_whatever_the_order() {
        let mut up = Uploads::new(1 << 20, Arc::default());
        let mut last = chunk("m", 1, 2, 10);
        (last.caption, last.filename) = (None, None);
        up.accept(last).unwrap();
        let mut first = chunk("m", 0, 2, 4096);
        first.caption = Some("the report".into());
        let Accepted::Complete(file) = up.accept(first).unwrap() else {
            panic!("not complete")
        };
        assert_eq!(file.caption.as_deref(), Some("the report"));
        assert_eq!(file.filename.as_deref(), Some("a.pdf"));
    }

    #[test]
    fn users_share_a_budget_per_user_and_in_all() {
        let budget = Arc::new(UploadBudget::new(20_000, 30_000));
        let phone = |user: &str| {
            let mut up = Uploads::new(1 << 20, budget.clone());
            up.set_user(user);
            up
        };
        let (mut a1, mut a2, mut b) = (phone("a"), phone("a"), phone("b"));
        a1.accept(chunk("x", 0, 3, 12_000)).unwrap();
        // The same user's second phone: over the user's 20,000.
        assert!(matches!(
            a2.accept(chunk("y", 0, 3, 12_000)),
            Err(UploadError::TooBig(_))
        ));
        // Another user fits under their own budget, until the 30,000 in all.
        b.accept(chunk("z", 0, 3, 12_000)).unwrap();
        assert!(matches!(
            b.accept(chunk("z", 1, 3, 8_000)),
            Err(UploadError::TooBig(_))
        ));
        // What a phone held comes back when it disconnects or goes away.
        a1.clear();
        a2.accept(chunk("y", 0, 3, 12_000)).unwrap();
        drop(a2);
        drop(b);
        assert_eq!(budget.lock().total, 0);
        assert!(budget.lock().users.is_empty());
    }
}
