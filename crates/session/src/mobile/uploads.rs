//! Reassembly of uploaded media, within the protocol's limits.
//!
//! A phone sends a file in one `media` frame or in chunks that share an `id`. Chunks may
//! arrive in any order and may be resent after a reconnect; a series is handed on only
//! when every part is there. Everything held is bounded: at most
//! [`limits::MAX_OPEN_UPLOADS`] series and `max_bytes` in all per device, and an
//! [`UploadBudget`] the hub keeps for every phone caps the bytes per user and in all.
//! A phone's [`Uploads`] never touch that budget: a chunk waits until the shell has
//! reserved its bytes ([`Accepted::NeedsBudget`], [`Uploads::budget_answer`]), and what
//! the uploads let go is handed back ([`Uploads::take_released`]).

use std::collections::{BTreeMap, HashMap};

use herald_mobile_proto::{limits, MediaKind, MediaUp};

/// A complete file.
#[derive(Debug, PartialEq)]
pub struct Upload {
    /// The phone's id for it.
    pub id: String,
    /// What it is.
    pub kind: MediaKind,
    /// Its MIME type, as the phone said.
    pub mime: Option<String>,
    /// Its file name, as the phone said.
    pub filename: Option<String>,
    /// The phone's words for it.
    pub caption: Option<String>,
    /// The file's bytes in order, as the chunks brought them (one for a single frame).
    pub parts: Vec<Vec<u8>>,
}

/// What became of a frame.
#[derive(Debug, PartialEq)]
pub enum Accepted {
    /// More parts are needed.
    Partial,
    /// The chunk waits for `bytes` of the user's budget: reserve them, and hand the
    /// answer to [`Uploads::budget_answer`].
    NeedsBudget {
        /// The bytes to reserve.
        bytes: usize,
    },
    /// This part was already here (a resend); nothing changed.
    Duplicate,
    /// Every part is here.
    Complete(Upload),
}

/// Why a chunk was refused; the series it belonged to is dropped.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum UploadError {
    /// Over a limit.
    #[error("{0}")]
    TooBig(String),
    /// A frame that does not fit the series.
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

/// A chunk that waits for the user's budget.
struct Parked {
    frame: MediaUp,
    data: Vec<u8>,
}

/// Unfinished uploads one user's phones may hold together.
pub const USER_UPLOAD_BYTES: usize = 32 * 1024 * 1024;
/// Unfinished uploads all phones may hold together.
pub const ALL_UPLOAD_BYTES: usize = 256 * 1024 * 1024;

/// The bytes of unfinished uploads held for every phone, per user and in all, so that
/// many device ids or many users cannot together hold more than the server can spare.
/// The hub owns the one budget; sessions ask it through their shells.
#[derive(Debug)]
pub struct UploadBudget {
    per_user: usize,
    total: usize,
    held: usize,
    users: HashMap<String, usize>,
}

impl Default for UploadBudget {
    fn default() -> Self {
        UploadBudget::new(USER_UPLOAD_BYTES, ALL_UPLOAD_BYTES)
    }
}

impl UploadBudget {
    /// At most `per_user` bytes for each user, `total` in all.
    pub fn new(per_user: usize, total: usize) -> Self {
        UploadBudget {
            per_user,
            total,
            held: 0,
            users: HashMap::new(),
        }
    }

    /// Hold `bytes` more for `user`, or say why not.
    pub fn reserve(&mut self, user: &str, bytes: usize) -> Result<(), UploadError> {
        let mine = self.users.get(user).copied().unwrap_or(0);
        if mine + bytes > self.per_user {
            return Err(UploadError::TooBig(format!(
                "more than {} bytes of unfinished uploads from this user's devices",
                self.per_user
            )));
        }
        if self.held + bytes > self.total {
            return Err(UploadError::TooBig(
                "the server holds too many unfinished uploads; try again shortly".into(),
            ));
        }
        self.held += bytes;
        *self.users.entry(user.to_owned()).or_default() += bytes;
        Ok(())
    }

    /// `user` no longer holds `bytes`.
    pub fn release(&mut self, user: &str, bytes: usize) {
        if bytes == 0 {
            return;
        }
        self.held = self.held.saturating_sub(bytes);
        if let Some(mine) = self.users.get_mut(user) {
            *mine = mine.saturating_sub(bytes);
            if *mine == 0 {
                self.users.remove(user);
            }
        }
    }

    /// The bytes held in all.
    pub fn held(&self) -> usize {
        self.held
    }
}

/// One phone's unfinished uploads; what they hold is drawn from the user's budget.
pub struct Uploads {
    open: HashMap<String, Series>,
    /// Bytes held, all reserved in the budget.
    buffered: usize,
    max_bytes: usize,
    /// The chunk whose bytes the shell is reserving.
    parked: Option<Box<Parked>>,
    /// Bytes let go since [`Uploads::take_released`] last looked.
    released: usize,
}

impl Uploads {
    /// Uploads of at most `max_bytes` each and together.
    pub fn new(max_bytes: usize) -> Self {
        Uploads {
            open: HashMap::new(),
            buffered: 0,
            max_bytes,
            parked: None,
            released: 0,
        }
    }

    /// Take a `media` frame.
    pub fn accept(&mut self, frame: MediaUp) -> Result<Accepted, UploadError> {
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
        if self.parked.is_some() {
            // The shell answers a reservation before it hands on the next frame.
            return Err(UploadError::TooBig(
                "a chunk is still waiting for room; send the next one after it".into(),
            ));
        }
        let checked = self.check_chunk(&frame, &data);
        match checked {
            Ok(true) => {
                let bytes = data.len();
                // The encoded copy is not needed any more.
                let frame = MediaUp {
                    data: String::new(),
                    ..frame
                };
                self.parked = Some(Box::new(Parked { frame, data }));
                Ok(Accepted::NeedsBudget { bytes })
            }
            Ok(false) => Ok(Accepted::Duplicate),
            Err(err) => {
                self.drop_series(&frame.id);
                Err(err)
            }
        }
    }

    /// The shell's answer for the chunk that waits: with its bytes reserved it joins
    /// its series, refused it drops the series.
    pub fn budget_answer(
        &mut self,
        granted: Result<(), UploadError>,
    ) -> Result<Accepted, UploadError> {
        let Some(parked) = self.parked.take() else {
            return Ok(Accepted::Duplicate);
        };
        let Parked { frame, data } = *parked;
        if let Err(refused) = granted {
            self.drop_series(&frame.id);
            return Err(refused);
        }
        self.buffered += data.len();
        // A series dropped meanwhile gives the reserved bytes straight back.
        let Some(series) = self.open.get_mut(&frame.id) else {
            self.release(data.len());
            return Ok(Accepted::Partial);
        };
        series.bytes += data.len();
        series.chunks.insert(frame.part, data);
        if series.chunks.len() < series.parts as usize {
            return Ok(Accepted::Partial);
        }
        let Some(series) = self.open.remove(&frame.id) else {
            return Ok(Accepted::Partial);
        };
        self.release(series.bytes);
        Ok(Accepted::Complete(Upload {
            id: frame.id,
            kind: series.kind,
            mime: series.mime,
            filename: series.filename,
            caption: series.caption,
            // Kept apart: a 4 MiB copy per upload saved; they are written one after another.
            parts: series.chunks.into_values().collect(),
        }))
    }

    /// [`Uploads::accept`] for an owner that holds `budget` itself (the session's shell
    /// answers through effects instead): reserves for `user` at once and gives back
    /// what was let go.
    pub fn accept_within(
        &mut self,
        frame: MediaUp,
        budget: &mut UploadBudget,
        user: &str,
    ) -> Result<Accepted, UploadError> {
        let mut accepted = self.accept(frame);
        if let Ok(Accepted::NeedsBudget { bytes }) = accepted {
            accepted = self.budget_answer(budget.reserve(user, bytes));
        }
        budget.release(user, self.take_released());
        accepted
    }

    /// [`Uploads::clear`], giving what was held back to `budget` for `user`.
    pub fn clear_within(&mut self, budget: &mut UploadBudget, user: &str) {
        self.clear();
        budget.release(user, self.take_released());
    }

    /// Bytes the uploads let go since the last call: give them back to the budget.
    pub fn take_released(&mut self) -> usize {
        std::mem::take(&mut self.released)
    }

    fn release(&mut self, bytes: usize) {
        self.buffered -= bytes;
        self.released += bytes;
    }

    /// Whether a new chunk of `data` may join its series (false: a resend). Opens the
    /// series on its first chunk.
    fn check_chunk(&mut self, frame: &MediaUp, data: &[u8]) -> Result<bool, UploadError> {
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
            return Ok(false);
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
        Ok(true)
    }

    fn drop_series(&mut self, id: &str) {
        if let Some(series) = self.open.remove(id) {
            self.release(series.bytes);
        }
    }

    /// Forget every unfinished series (the phone disconnected, or changed hands).
    pub fn clear(&mut self) {
        self.open.clear();
        self.parked = None;
        self.release(self.buffered);
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

    /// A phone of `user` whose shell reserves from `budget` as a hub would.
    struct Phone<'a> {
        user: &'a str,
        uploads: Uploads,
    }

    impl Phone<'_> {
        fn accept(
            &mut self,
            budget: &mut UploadBudget,
            frame: MediaUp,
        ) -> Result<Accepted, UploadError> {
            self.uploads.accept_within(frame, budget, self.user)
        }

        fn clear(&mut self, budget: &mut UploadBudget) {
            self.uploads.clear_within(budget, self.user);
        }
    }

    fn phone(user: &str, max_bytes: usize) -> Phone<'_> {
        Phone {
            user,
            uploads: Uploads::new(max_bytes),
        }
    }

    #[test]
    fn reassembles_in_any_order_and_ignores_resends() {
        let budget = &mut UploadBudget::default();
        let mut up = phone("a", 1 << 20);
        assert_eq!(
            up.accept(budget, chunk("m", 2, 3, 10)).unwrap(),
            Accepted::Partial
        );
        assert_eq!(
            up.accept(budget, chunk("m", 0, 3, 4096)).unwrap(),
            Accepted::Partial
        );
        assert_eq!(
            up.accept(budget, chunk("m", 0, 3, 4096)).unwrap(),
            Accepted::Duplicate
        );
        assert_eq!(budget.held(), 4096 + 10);
        let Accepted::Complete(file) = up.accept(budget, chunk("m", 1, 3, 4096)).unwrap() else {
            panic!("not complete")
        };
        let bytes = file.parts.concat();
        assert_eq!(bytes.len(), 4096 * 2 + 10);
        assert_eq!(bytes[0], 0);
        assert_eq!(bytes[4096], 1);
        assert_eq!(bytes[8192], 2);
        assert_eq!(up.uploads.buffered, 0);
        assert_eq!(budget.held(), 0, "given back once complete");
    }

    #[test]
    fn limits_are_enforced() {
        let budget = &mut UploadBudget::default();
        let mut up = phone("a", 20_000);
        assert!(matches!(
            up.accept(budget, chunk("one", 0, 1, 20_001)),
            Err(UploadError::TooBig(_))
        ));
        assert!(matches!(
            up.accept(budget, chunk("small", 0, 2, 100)),
            Err(UploadError::BadFrame(_))
        ));
        for i in 0..8 {
            up.accept(budget, chunk(&format!("s{i}"), 0, 2, 1)).ok();
        }
        // Small last chunks are fine; eight series are open now.
        for i in 0..8 {
            assert_eq!(
                up.accept(budget, chunk(&format!("s{i}"), 1, 2, 1)).unwrap(),
                Accepted::Partial
            );
        }
        assert!(matches!(
            up.accept(budget, chunk("ninth", 1, 2, 1)),
            Err(UploadError::TooBig(_))
        ));
        up.clear(budget);
        assert_eq!(budget.held(), 0);
        assert_eq!(
            up.accept(budget, chunk("a", 0, 3, 8000)).unwrap(),
            Accepted::Partial
        );
        assert_eq!(
            up.accept(budget, chunk("b", 0, 3, 8000)).unwrap(),
            Accepted::Partial
        );
        // Over the per-device buffer: the offending series is dropped, the other stays.
        assert!(matches!(
            up.accept(budget, chunk("c", 0, 3, 8000)),
            Err(UploadError::TooBig(_))
        ));
        assert_eq!(up.uploads.buffered, 16_000);
        assert!(matches!(
            up.accept(budget, chunk("a", 1, 4, 8000)),
            Err(UploadError::BadFrame(_))
        ));
        assert_eq!(up.uploads.buffered, 8_000);
        assert_eq!(budget.held(), 8_000);
    }

    #[test]
    fn the_first_part_names_the_file_whatever_the_order() {
        let budget = &mut UploadBudget::default();
        let mut up = phone("a", 1 << 20);
        let mut last = chunk("m", 1, 2, 10);
        (last.caption, last.filename) = (None, None);
        up.accept(budget, last).unwrap();
        let mut first = chunk("m", 0, 2, 4096);
        first.caption = Some("the report".into());
        let Accepted::Complete(file) = up.accept(budget, first).unwrap() else {
            panic!("not complete")
        };
        assert_eq!(file.caption.as_deref(), Some("the report"));
        assert_eq!(file.filename.as_deref(), Some("a.pdf"));
    }

    #[test]
    fn users_share_a_budget_per_user_and_in_all() {
        let budget = &mut UploadBudget::new(20_000, 30_000);
        let (mut a1, mut a2, mut b) = (
            phone("a", 1 << 20),
            phone("a", 1 << 20),
            phone("b", 1 << 20),
        );
        a1.accept(budget, chunk("x", 0, 3, 12_000)).unwrap();
        // The same user's second phone: over the user's 20,000, and its series is gone.
        assert!(matches!(
            a2.accept(budget, chunk("y", 0, 3, 12_000)),
            Err(UploadError::TooBig(_))
        ));
        assert_eq!(a2.uploads.buffered, 0);
        // Another user fits under their own budget, until the 30,000 in all.
        b.accept(budget, chunk("z", 0, 3, 12_000)).unwrap();
        assert!(matches!(
            b.accept(budget, chunk("z", 1, 3, 8_000)),
            Err(UploadError::TooBig(_))
        ));
        // What a phone held comes back when it disconnects or goes away.
        a1.clear(budget);
        a2.accept(budget, chunk("y", 0, 3, 12_000)).unwrap();
        a2.clear(budget);
        b.clear(budget);
        assert_eq!(budget.held(), 0);
        assert!(budget.users.is_empty());
    }

    #[test]
    fn a_chunk_waits_for_its_reservation_and_one_waits_at_a_time() {
        let mut up = Uploads::new(1 << 20);
        assert_eq!(
            up.accept(chunk("m", 0, 2, 4096)).unwrap(),
            Accepted::NeedsBudget { bytes: 4096 }
        );
        assert!(matches!(
            up.accept(chunk("m", 1, 2, 10)),
            Err(UploadError::TooBig(_))
        ));
        assert_eq!(up.budget_answer(Ok(())).unwrap(), Accepted::Partial);
        assert_eq!(up.buffered, 4096);
        assert_eq!(
            up.accept(chunk("m", 1, 2, 10)).unwrap(),
            Accepted::NeedsBudget { bytes: 10 }
        );
        let refused = up.budget_answer(Err(UploadError::TooBig("full".into())));
        assert_eq!(refused, Err(UploadError::TooBig("full".into())));
        assert_eq!((up.buffered, up.take_released()), (0, 4096));
    }
}
