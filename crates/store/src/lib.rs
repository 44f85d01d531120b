//! State that must survive a restart: enrolled devices, pairing and staged firmware
//! updates.
//!
//! The server talks to a [`Store`] trait so that a shared store can replace the
//! default SQLite file when one gateway is not enough, through a [`StoreHandle`] that
//! runs its calls on a thread of their own. Every method is one transaction:
//! a crash leaves either the old state or the new one, never half of a change.

mod first_contacts;
mod handle;
mod sqlite;

pub use handle::StoreHandle;
pub use herald_admin_api::MAX_PHONES_PER_USER;
pub use herald_port::PairingRecord;
pub use sqlite::SqliteStore;

use herald_port::Platform;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot prepare the data directory {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the store was written by a newer herald (schema {found}, this build knows {known})")]
    TooNew { found: i64, known: i64 },
    #[error("corrupt record for {0}")]
    Corrupt(String),
    #[error("migrating the store would leave {0} references to rows that do not exist")]
    Dangling(i64),
    #[error("another program holds the store's write lock (first contacts of the last run wait in its journal)")]
    Held,
    #[error("store task was interrupted")]
    Interrupted,
    #[error("cannot start the store's thread: {0}")]
    Thread(std::io::Error),
}

impl StoreError {
    /// Another connection holds the database: the same call may succeed later.
    pub(crate) fn is_busy(&self) -> bool {
        use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
        matches!(
            self,
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(failure, _))
                if matches!(failure.code, DatabaseBusy | DatabaseLocked)
        )
    }
}

/// An enrolled gadget.
#[derive(Clone, PartialEq, Serialize)]
pub struct DeviceRecord {
    pub id: String,
    #[serde(skip)]
    pub key: [u8; 32],
    pub name: Option<String>,
    pub board: Option<String>,
    pub firmware: Option<String>,
    pub enrolled_at: Millis,
    pub last_seen: Option<Millis>,
    pub sensors: Map<String, Value>,
    /// The person it belongs to (a phone user's id), once someone said so.
    pub owner: Option<String>,
}

/// Every field but the key.
impl std::fmt::Debug for DeviceRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceRecord")
            .field("id", &self.id)
            .field("key", &"<secret>")
            .field("name", &self.name)
            .field("board", &self.board)
            .field("firmware", &self.firmware)
            .field("enrolled_at", &self.enrolled_at)
            .field("last_seen", &self.last_seen)
            .field("sensors", &self.sensors)
            .field("owner", &self.owner)
            .finish()
    }
}

/// What a device reported about itself in its latest `hello`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceProfile {
    pub name: Option<String>,
    pub board: Option<String>,
    pub firmware: Option<String>,
    pub sensors: Map<String, Value>,
}

/// A gadget's first contact, to be enrolled. (No `Debug`: it holds the key.)
pub struct NewDevice {
    pub id: String,
    pub key: [u8; 32],
    pub profile: DeviceProfile,
    pub now: Millis,
}

/// What a phone says about itself in `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhoneInfo {
    pub name: Option<String>,
    pub platform: Option<String>,
}

/// A phone (mobile protocol device id) and the user who owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhoneRecord {
    pub id: String,
    pub user_id: String,
    #[serde(flatten)]
    pub info: PhoneInfo,
    pub first_seen: Millis,
    pub last_seen: Millis,
}

/// Where a phone's notifications go: its Web Push subscription.
#[derive(Clone, PartialEq, Eq)]
pub struct PushRecord {
    pub device_id: String,
    pub user_id: String,
    /// A capability URL: whoever has it may push to the app. Never logged.
    pub endpoint: String,
    /// The app's P-256 public key, uncompressed.
    pub p256dh: Vec<u8>,
    /// The app's auth secret.
    pub auth: Vec<u8>,
}

/// The device and user only: the endpoint and keys stay out of logs.
impl std::fmt::Debug for PushRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushRecord")
            .field("device_id", &self.device_id)
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhoneClaim {
    /// The device id is (now) this user's.
    Mine,
    /// Another user connected with this device id first.
    OwnedBy(String),
    /// A new device id, and the user already has [`MAX_PHONES_PER_USER`] phones seen
    /// within [`STALE_PHONE_DAYS`].
    TooMany,
}

/// A phone unseen this long gives its place to a user's new one.
pub const STALE_PHONE_DAYS: i64 = 30;

pub use herald_session::gadget::handshake::Enrollment;
pub use herald_session::gadget::ota::{OtaImage, OtaProgress, OtaStatus, OtaUpdate};
pub(crate) use herald_session::gadget::sensors::merge_sensors;
pub use herald_session::gadget::sensors::{
    admissible_sensors, MAX_SENSORS, MAX_SENSOR_KEY, MAX_SENSOR_TEXT,
};

pub trait Store: Send + Sync + 'static {
    fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError>;
    fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError>;
    /// Enroll each device (trust on first use), all in one transaction: each is
    /// enrolled now, was already under the same key, or conflicts with another key.
    fn enroll(&self, devices: &[NewDevice]) -> Result<Vec<Enrollment>, StoreError>;
    /// Record a successful connection: the profile of its `hello` and the time. Returns
    /// whether the device is enrolled (nothing is written otherwise).
    fn touch(&self, id: &str, profile: &DeviceProfile, now: Millis) -> Result<bool, StoreError>;
    /// Record when devices were last seen, in one transaction. A time older than the
    /// one stored is ignored, and an id that is not enrolled is skipped.
    fn set_last_seen(&self, seen: &[(String, Millis)]) -> Result<(), StoreError>;
    /// Merge readings into the stored sensors.
    fn merge_sensors(&self, id: &str, sensors: &Map<String, Value>) -> Result<(), StoreError>;
    /// Remove a device and its pairing; returns whether it existed.
    fn forget(&self, id: &str) -> Result<bool, StoreError>;
    /// Set or clear whose gadget `id` is; returns whether it is enrolled.
    fn set_owner(&self, id: &str, owner: Option<&str>) -> Result<bool, StoreError>;

    fn pairing(
        &self,
        platform: Platform,
        user_id: &str,
    ) -> Result<Option<PairingRecord>, StoreError>;
    fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError>;
    /// Store a pending pairing with a fresh code, replacing an older pending one.
    fn put_pending(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
        code: &str,
        now: Millis,
    ) -> Result<(), StoreError>;
    /// Approve the pending pairing holding `code` if it was created after `not_before`.
    fn approve_code(
        &self,
        platform: Platform,
        code: &str,
        not_before: Millis,
        now: Millis,
    ) -> Result<Option<PairingRecord>, StoreError>;
    /// Approve a user directly (no code needed).
    fn approve_user(
        &self,
        platform: Platform,
        user_id: &str,
        now: Millis,
    ) -> Result<PairingRecord, StoreError>;
    /// Remove a pairing, pending or approved; returns whether it existed.
    fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, StoreError>;

    /// Record a phone connecting; the first user to use a device id owns it.
    fn claim_phone(
        &self,
        device_id: &str,
        user_id: &str,
        info: &PhoneInfo,
        now: Millis,
    ) -> Result<PhoneClaim, StoreError>;
    fn phones(&self) -> Result<Vec<PhoneRecord>, StoreError>;
    /// The user who owns a phone's device id, if it has connected.
    fn phone_owner(&self, device_id: &str) -> Result<Option<String>, StoreError>;
    /// Keep a phone's push subscription, replacing the one it had.
    fn put_push_subscription(
        &self,
        subscription: &PushRecord,
        now: Millis,
    ) -> Result<(), StoreError>;
    /// Drop a phone's push subscription; returns whether it had one.
    fn remove_push_subscription(&self, device_id: &str) -> Result<bool, StoreError>;
    /// The push subscriptions of every phone of `user_id`, or of everyone.
    fn push_subscriptions(&self, user_id: Option<&str>) -> Result<Vec<PushRecord>, StoreError>;
    /// Keep a frame of a running turn for a phone that is away, within the outbox's
    /// bounds (the oldest go first).
    fn outbox_push(&self, device_id: &str, frame: &str, now: Millis) -> Result<(), StoreError>;
    /// Take what waits for a phone, oldest first, leaving nothing; frames kept before
    /// `since` have lapsed and are dropped.
    fn outbox_take(&self, device_id: &str, since: Millis) -> Result<Vec<String>, StoreError>;

    /// Record a new update for a device (status `sending`, no attempt yet), replacing a
    /// finished one. Returns `None`, changing nothing, while another update of the
    /// device is sending or retrying.
    fn stage_ota(
        &self,
        device_id: &str,
        image: &OtaImage,
        now: Millis,
    ) -> Result<Option<OtaUpdate>, StoreError>;
    fn ota_update(&self, device_id: &str) -> Result<Option<OtaUpdate>, StoreError>;
    fn ota_updates(&self) -> Result<Vec<OtaUpdate>, StoreError>;
    /// Record how update `id` stands; an update replaced or forgotten meanwhile is left
    /// alone.
    fn save_ota_progress(
        &self,
        id: i64,
        progress: &OtaProgress,
        now: Millis,
    ) -> Result<(), StoreError>;
}
