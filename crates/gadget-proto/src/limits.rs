//! Numbers fixed by the protocol, so the server, the device core and the tests agree.
//!
//! Values marked *(behaviour)* in the spec describe what existing servers and devices do;
//! they are here so every side picks the same ones.

// --- Transport -----------------------------------------------------------------------

/// Default TCP port of the gadget endpoint.
pub const DEFAULT_PORT: u16 = 8765;
/// Default WebSocket path; any other path gets HTTP 404.
pub const DEFAULT_PATH: &str = "/gadget";
/// Largest inbound frame, text or binary, the server accepts (1 MiB).
pub const MAX_INBOUND_FRAME: usize = 1024 * 1024;
/// Deepest JSON nesting accepted; checked before parsing so a hostile frame of brackets
/// cannot make the parser recurse.
pub const MAX_JSON_DEPTH: usize = 32;
/// WebSocket close code for a handshake or protocol failure (policy violation).
pub const CLOSE_POLICY_VIOLATION: u16 = 1008;
/// WebSocket close code for a connection replaced by a newer one for the same device.
pub const CLOSE_REPLACED: u16 = 1000;

// --- Field lengths (characters) ------------------------------------------------------

/// Longest device name.
pub const MAX_NAME: usize = 64;
/// Longest board name.
pub const MAX_BOARD: usize = 64;
/// Longest firmware version string.
pub const MAX_FIRMWARE: usize = 32;
/// Longest text of a `text` message.
pub const MAX_TEXT: usize = 4000;
/// Longest message id (`text.id`, `audio.start.id`, ...).
pub const MAX_ID: usize = 64;
/// Most actions a device may offer in its manifest.
pub const MAX_ACTIONS: usize = 32;
/// Longest action description, in characters.
pub const MAX_ACTION_DESCRIPTION: usize = 300;
/// Largest action parameter schema, in bytes of JSON.
pub const MAX_ACTION_PARAMS: usize = 4096;
/// Longest event name passed on to the agent.
pub const MAX_EVENT_NAME: usize = 64;
/// Longest compact JSON of event data passed on to the agent.
pub const MAX_EVENT_DATA: usize = 500;

// --- Handshake and identity ----------------------------------------------------------

/// Each handshake receive (hello, auth) must arrive within this many seconds.
pub const HANDSHAKE_TIMEOUT_SECS: u64 = 10;
/// Length of the device key in bytes.
pub const KEY_LEN: usize = 32;
/// Length of a challenge or `ota.ready` nonce in bytes (before base64).
pub const NONCE_LEN: usize = 16;
/// Length of a device id: `hg-` plus 16 hex characters.
pub const DEVICE_ID_LEN: usize = 19;
/// Length of `welcome.session` in lowercase hex characters.
pub const SESSION_ID_LEN: usize = 12;
/// Most devices waiting to enroll at once before new ones get `busy`.
pub const MAX_PENDING_ENROLLMENTS: usize = 16;
/// Most devices from one address waiting to enroll before new ones get `busy`.
pub const MAX_PENDING_ENROLLMENTS_PER_ADDR: usize = 4;

// --- Pairing -------------------------------------------------------------------------

/// Length of a pairing code.
pub const PAIRING_CODE_LEN: usize = 8;
/// Characters a pairing code is drawn from: no 0/O, 1/I to misread.
pub const PAIRING_CODE_ALPHABET: &str = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// How long a pairing code stays valid.
pub const PAIRING_CODE_TTL_SECS: u64 = 3600;

// --- Heartbeat -----------------------------------------------------------------------

/// Heartbeat interval the server announces unless configured otherwise.
pub const DEFAULT_HEARTBEAT_SECS: u32 = 20;
/// Smallest heartbeat interval; devices clamp to it.
pub const MIN_HEARTBEAT_SECS: u32 = 5;
/// Largest heartbeat interval devices accept; they clamp to it.
pub const MAX_HEARTBEAT_SECS: u32 = 300;
/// A connection with no inbound frame for this many heartbeats is dead.
pub const DEAD_AFTER_HEARTBEATS: u32 = 3;

// --- Audio ---------------------------------------------------------------------------

/// Lowest sample rate accepted in a device `audio.start`.
pub const MIN_AUDIO_RATE: u32 = 4000;
/// Highest sample rate accepted in a device `audio.start`.
pub const MAX_AUDIO_RATE: u32 = 48000;
/// Utterances shorter than this are dropped with a notice.
pub const MIN_UTTERANCE_MS: u64 = 250;
/// Default cap on one utterance; audio past it is dropped.
pub const DEFAULT_MAX_UTTERANCE_SECS: u32 = 60;
/// Duration of one audio frame to the device *(behaviour)*.
pub const AUDIO_FRAME_MS: u32 = 40;
/// How far ahead of real time the server may send audio.
pub const AUDIO_MAX_LEAD_MS: u32 = 500;

// --- Display -------------------------------------------------------------------------

/// Size of one image chunk on channel 2 *(behaviour)*.
pub const IMAGE_CHUNK: usize = 4096;

// --- Questions and actions -----------------------------------------------------------

/// Length of a prompt id in hex characters *(behaviour)*.
pub const PROMPT_ID_LEN: usize = 8;
/// Time to live of a slash-command confirmation prompt *(behaviour)*.
pub const CONFIRM_PROMPT_TTL_SECS: u32 = 300;
/// Length of an action id in hex characters.
pub const ACTION_ID_LEN: usize = 12;
/// How long the server waits for `action.result`.
pub const ACTION_TIMEOUT_SECS: u64 = 18;

// --- Firmware updates ----------------------------------------------------------------

/// Size of one firmware frame on channel 3.
pub const OTA_FRAME: usize = 4096;
/// The device acknowledges after every this many bytes (and at the end).
pub const OTA_ACK_INTERVAL: u64 = 16 * 1024;
/// Most unacknowledged firmware bytes the server keeps in flight.
pub const OTA_MAX_UNACKED: u64 = 64 * 1024;
/// An update with no data for this long is abandoned (`timeout`).
pub const OTA_IDLE_TIMEOUT_SECS: u64 = 30;
/// How long the server waits for `ota.ready` *(behaviour)*.
pub const OTA_READY_TIMEOUT_SECS: u64 = 30;
/// How long the server waits for each `ota.ack` *(behaviour)*.
pub const OTA_ACK_TIMEOUT_SECS: u64 = 30;
/// How long the server waits for `ota.done` after `ota.end` *(behaviour)*.
pub const OTA_DONE_TIMEOUT_SECS: u64 = 60;
/// Attempts in all for an update that failed by disconnect or timeout *(behaviour)*.
pub const OTA_MAX_ATTEMPTS: u32 = 3;
/// New firmware that does not reach `welcome` within this time is rolled back.
pub const OTA_PROBATION_SECS: u64 = 300;
/// Smallest plausible ESP-IDF application image: header plus app descriptor.
pub const OTA_MIN_IMAGE: usize = 288;

// --- Reference device behaviour ------------------------------------------------------

/// Reconnect backoff steps in seconds; the last one repeats.
pub const RECONNECT_BACKOFF_SECS: [u64; 6] = [1, 2, 4, 8, 15, 30];
/// A session that lasted this long resets the backoff.
pub const BACKOFF_RESET_AFTER_SECS: u64 = 30;
/// Connecting must finish within this many seconds.
pub const CONNECT_TIMEOUT_SECS: u64 = 10;
/// A push-to-talk press shorter than this sends `audio.cancel` "too short".
pub const MIN_PRESS_MS: u64 = 350;
/// Device-side cap on one recording.
pub const MAX_RECORDING_SECS: u64 = 30;
/// A prompt ignores presses this soon after it appears.
pub const PROMPT_GUARD_MS: u64 = 600;
/// Holding CANCEL this long sends `session.new`.
pub const SESSION_NEW_HOLD_MS: u64 = 2000;
/// With no reply for this long the device shows "No reply".
pub const NO_REPLY_SECS: u64 = 180;
/// Default time a display card stays up when `ttl_s` is absent.
pub const DEFAULT_CARD_TTL_SECS: u32 = 15;
/// Default time an image stays up when `ttl_s` is absent.
pub const DEFAULT_IMAGE_TTL_SECS: u32 = 30;
/// Default time a notice stays up when `ttl_s` is absent.
pub const DEFAULT_NOTICE_TTL_SECS: u32 = 8;
