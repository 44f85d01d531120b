//! The phone session's reassembly of files phones upload in chunks, and the budget phones
//! share, against a record of what they were given.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use arbitrary::{Result, Unstructured};
use herald_mobile_proto::limits::{MAX_OPEN_UPLOADS, MAX_PARTS, MIN_CHUNK_BYTES};
use herald_mobile_proto::{base64_decoded_len, encode_base64, MediaKind, MediaUp};

use herald_session::mobile::uploads::{Accepted, UploadBudget, UploadError, Uploads};

/// Series ids: one more than the open-series cap, so the cap is reachable.
const IDS: [&str; MAX_OPEN_UPLOADS + 1] = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
/// Users a phone may switch to; until it does, it counts against `""`.
const USERS: [&str; 2] = ["u1", "u2"];
const KINDS: [MediaKind; 4] = [
    MediaKind::Image,
    MediaKind::Document,
    MediaKind::Audio,
    MediaKind::Video,
];
/// Most frames one input sends: enough to fill several series, few enough to stay fast.
const MAX_FRAMES: usize = 16;

/// A series the server holds part of, as the phone sent it.
struct Open {
    kind: MediaKind,
    parts: u32,
    chunks: BTreeMap<u32, Vec<u8>>,
}

/// One phone's connection: the server's uploads and what it was seen to accept.
struct Phone {
    uploads: Uploads,
    user: &'static str,
    open: HashMap<String, Open>,
}

impl Phone {
    fn new(max_bytes: usize) -> Phone {
        Phone {
            uploads: Uploads::new(max_bytes),
            user: "",
            open: HashMap::new(),
        }
    }

    /// A chunk, reserved from `budget` as the phone's shell would.
    fn accept(
        &mut self,
        budget: &mut UploadBudget,
        frame: MediaUp,
    ) -> Result<Accepted, UploadError> {
        self.uploads.accept_within(frame, budget, self.user)
    }

    /// The connection is gone, or its user changes: what it held goes back.
    fn clear(&mut self, budget: &mut UploadBudget) {
        self.uploads.clear_within(budget, self.user);
        self.open.clear();
    }

    fn held(&self) -> usize {
        let chunks = self.open.values().flat_map(|s| s.chunks.values());
        chunks.map(Vec::len).sum()
    }
}

/// Two phones sharing one budget send chunks, switch users and reconnect.
pub fn mobile_upload(data: &[u8]) {
    let _ = run(&mut Unstructured::new(data));
}

fn run(u: &mut Unstructured) -> Result<()> {
    let max_bytes = MIN_CHUNK_BYTES * u.int_in_range(1..=4)?;
    let per_user = MIN_CHUNK_BYTES * u.int_in_range(1..=4)?;
    let total = MIN_CHUNK_BYTES * u.int_in_range(1..=6)?;
    let budget = &mut UploadBudget::new(per_user, total);
    let mut phones = [Phone::new(max_bytes), Phone::new(max_bytes)];
    for _ in 0..MAX_FRAMES {
        if u.is_empty() {
            break;
        }
        let phone = &mut phones[usize::from(u.arbitrary::<bool>()?)];
        match u.int_in_range(0..=31)? {
            0 | 1 => phone.clear(budget),
            2 | 3 => {
                let user = *u.choose(&USERS)?;
                if user != phone.user {
                    phone.clear(budget);
                    phone.user = user;
                }
            }
            // A reconnect: the old connection's uploads go with it.
            4 => {
                phone.clear(budget);
                *phone = Phone::new(max_bytes);
            }
            _ => {
                if let Some((frame, sent)) = chunk(u)? {
                    send(phone, budget, frame, &sent, max_bytes);
                }
            }
        }
        for user in ["", USERS[0], USERS[1]] {
            let mine: usize = phones
                .iter()
                .filter(|p| p.user == user)
                .map(Phone::held)
                .sum();
            assert!(
                mine <= per_user,
                "{mine} bytes held for {user:?}, over {per_user}"
            );
        }
        let all: usize = phones.iter().map(Phone::held).sum();
        assert!(all <= total, "{all} bytes held, over {total}");
    }
    // Whatever happened, nothing stays counted once the phones are gone.
    for phone in &mut phones {
        phone.clear(budget);
    }
    assert_eq!(budget.held(), 0, "bytes still counted");
    let mut phone = Phone::new(usize::MAX);
    let room = per_user.min(total) / MIN_CHUNK_BYTES;
    for part in 0..room {
        let frame = MediaUp {
            id: "after".into(),
            kind: MediaKind::Document,
            mime: None,
            filename: None,
            caption: None,
            data: payload(MIN_CHUNK_BYTES, 0, false).1.to_string(),
            part: u32::try_from(part).unwrap_or(u32::MAX),
            parts: u32::try_from(room + 1).unwrap_or(u32::MAX),
        };
        let accepted = phone.accept(budget, frame);
        assert_eq!(
            accepted,
            Ok(Accepted::Partial),
            "budget left over after {part} chunks"
        );
    }
    phone.clear(budget);
    Ok(())
}

/// Sends one chunk and checks the answer against what the phone sent before.
fn send(
    phone: &mut Phone,
    budget: &mut UploadBudget,
    frame: MediaUp,
    sent: &[u8],
    max_bytes: usize,
) {
    let (id, part, parts, kind, last) = (
        frame.id.clone(),
        frame.part,
        frame.parts,
        frame.kind,
        frame.is_last(),
    );
    let Ok(accepted) = phone.accept(budget, frame) else {
        // A refused chunk drops its series; a single-part file belongs to none.
        if parts > 1 {
            phone.open.remove(&id);
        }
        return;
    };
    if parts == 1 {
        assert!(sent.len() <= max_bytes);
        let Accepted::Complete(file) = accepted else {
            panic!("a single-part file was not complete: {accepted:?}")
        };
        assert_eq!(file.parts.concat(), sent);
        return;
    }
    if let Some(series) = phone.open.get(&id) {
        assert_eq!((series.kind, series.parts), (kind, parts));
    } else {
        assert!(phone.open.len() < MAX_OPEN_UPLOADS, "a series over the cap");
    }
    if !last {
        assert!(sent.len() >= MIN_CHUNK_BYTES, "a short chunk was taken");
    }
    let series = phone.open.entry(id.clone()).or_insert_with(|| Open {
        kind,
        parts,
        chunks: BTreeMap::new(),
    });
    match accepted {
        Accepted::Duplicate => assert!(series.chunks.contains_key(&part)),
        Accepted::NeedsBudget { .. } => panic!("a reservation left unanswered"),
        Accepted::Partial => {
            assert!(
                series.chunks.insert(part, sent.to_vec()).is_none(),
                "a resend kept"
            );
            assert!(series.chunks.len() < series.parts as usize);
        }
        Accepted::Complete(file) => {
            assert!(
                series.chunks.insert(part, sent.to_vec()).is_none(),
                "a resend kept"
            );
            assert_eq!(series.chunks.len(), series.parts as usize);
            let whole: Vec<u8> = series.chunks.values().flatten().copied().collect();
            assert_eq!(file.parts.concat(), whole);
            assert_eq!(file.kind, series.kind);
            phone.open.remove(&id);
        }
    }
    assert!(
        phone.held() <= max_bytes,
        "{} bytes held, over {max_bytes}",
        phone.held()
    );
}

/// Chunk sizes: empty, tiny, and around the floor for chunks other than the last.
const LENGTHS: [usize; 10] = [0, 1, 3, 100, 4095, 4096, 4096, 4097, 4099, 8192];

/// A chunk's bytes and their base64, made once per (length, fill, wrapped): encoding
/// kilobytes for every frame would make this target a hundred times slower.
type Payload = (Rc<[u8]>, Rc<str>);

thread_local! {
    static PAYLOADS: RefCell<HashMap<(usize, u8, bool), Payload>> = RefCell::default();
}

fn payload(len: usize, fill: u8, wrapped: bool) -> Payload {
    PAYLOADS.with_borrow_mut(|cache| {
        let made = cache.entry((len, fill, wrapped)).or_insert_with(|| {
            let bytes: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
            let mut data = encode_base64(&bytes);
            if wrapped {
                // Android wraps base64 lines; the decoder takes them.
                data = data
                    .as_bytes()
                    .chunks(76)
                    .map(|line| String::from_utf8_lossy(line) + "\n")
                    .collect();
            }
            (bytes.into(), data.into())
        });
        made.clone()
    })
}

/// The next `media` frame and its bytes, if the frame decoder lets it through: ids,
/// `part` and `parts` are always in range here, so only its floor on chunk size applies.
fn chunk(u: &mut Unstructured) -> Result<Option<(MediaUp, Rc<[u8]>)>> {
    let id = *u.choose(&IDS)?;
    let kind = *u.choose(&KINDS)?;
    let parts = if u.ratio(1, 32)? {
        MAX_PARTS
    } else {
        u.int_in_range(1..=4)?
    };
    let part = u.int_in_range(0..=parts - 1)?;
    let (bytes, data) = payload(*u.choose(&LENGTHS)?, u.int_in_range(0..=7)?, u.ratio(1, 8)?);
    let frame = MediaUp {
        id: id.into(),
        kind,
        mime: Some("application/octet-stream".into()),
        filename: None,
        caption: None,
        data: data.to_string(),
        part,
        parts,
    };
    if !frame.is_last() && base64_decoded_len(&frame.data) < MIN_CHUNK_BYTES {
        return Ok(None);
    }
    Ok(Some((frame, bytes)))
}
