//! Protocol limits shared by the server, the SDKs and the vectors.
//!
//! They live in one place so that `ready.capabilities`, the server's checks and the tests
//! cannot drift apart. Sizes are bytes of decoded payload unless stated otherwise.

/// Largest WebSocket text frame either side accepts (`too_big`, then close 1009).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Largest single file, voice note or assembled upload.
pub const MAX_MEDIA_BYTES: usize = 8 * 1024 * 1024;

/// Chunk size the server uses for media it sends and suggests to clients; 3 MiB of bytes is
/// 4 MiB of base64, comfortably under [`MAX_FRAME_BYTES`].
pub const MEDIA_CHUNK_BYTES: usize = 3 * 1024 * 1024;

/// Most chunks one upload may announce in `parts`.
pub const MAX_PARTS: u32 = 2048;

/// Smallest chunk (decoded bytes) other than the last one of a series; tiny chunks are a
/// cheap way to make the server do a lot of bookkeeping.
pub const MIN_CHUNK_BYTES: usize = 4096;

/// Unfinished uploads a device may hold at once.
pub const MAX_OPEN_UPLOADS: usize = 8;

/// How many recent message ids per device are remembered to drop resends.
pub const DEDUP_IDS: usize = 1024;

/// How long a remembered message id stays remembered.
pub const DEDUP_TTL_SECS: u64 = 86_400;

/// Frames kept for a device that dropped mid-turn.
pub const OUTBOX_FRAMES: usize = 256;

/// Bytes kept for a device that dropped mid-turn.
pub const OUTBOX_BYTES: usize = 8 * 1024 * 1024;

/// How long frames for a dropped device are kept.
pub const OUTBOX_TTL_SECS: u64 = 600;

/// Default lifetime of a question card.
pub const PROMPT_TIMEOUT_SECS: u32 = 300;

/// Deepest JSON nesting accepted; real frames need 3, and a cap keeps hostile input from
/// costing recursion.
pub const MAX_DEPTH: usize = 32;

/// Longest id (message, media, device, card, delivery target) a client may send. Ids are
/// remembered for deduplication (up to [`DEDUP_IDS`] per device) and appear in session keys
/// and logs, so they must stay small.
pub const MAX_ID_BYTES: usize = 256;

/// Default `max_message_chars`: replies are split into chunks of at most this many
/// characters, a size every mobile UI renders without trouble.
pub const MAX_MESSAGE_CHARS: u32 = 4000;

/// The longest push subscription (endpoint and keys) a server keeps.
pub const MAX_PUSH_SUBSCRIPTION_BYTES: usize = 1024;
