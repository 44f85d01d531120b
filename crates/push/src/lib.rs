//! Web Push for Herald: notifications to an app that is closed.
//!
//! - [`VapidKey`] is the server's key (made at first start, 0600 in the data directory)
//!   and signs each push (RFC 8292).
//! - [`Pusher`] takes a payload for a subscription, encrypts it for that subscription
//!   alone (RFC 8291, `aes128gcm`, by `web-push-native`), and sends it to the
//!   subscription's push service (RFC 8030) from a bounded queue, on tasks of its own:
//!   a push service that hangs holds up nobody, each call has a timeout, 429 and 5xx
//!   answers are tried again later, and a subscription the service says is gone (404,
//!   410) is reported so its owner drops it. A person gets at most [`PER_PERSON`] pushes
//!   a [`WINDOW`]. No endpoint or key is ever logged: a push is named by its device.

mod vapid;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, info, warn};
use web_push_native::p256::PublicKey;
use web_push_native::{Auth, WebPushBuilder};

pub use vapid::VapidKey;

/// Pushes waiting to be sent before new ones are dropped.
pub const QUEUE: usize = 256;
/// Pushes in flight at once.
const IN_FLIGHT: usize = 4;
/// Attempts at one push, when the service answers 429 or 5xx or cannot be reached.
const ATTEMPTS: u32 = 3;
/// The longest a push service may ask us to wait before trying again.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// One call to a push service, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many pushes per person in a [`WINDOW`]; the rest are dropped.
pub const PER_PERSON: usize = 30;
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long a push service keeps a push for a device that is offline.
const TTL_SECONDS: u64 = 24 * 3600;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("the VAPID key {}: {why}", path.display())]
    Key { path: PathBuf, why: String },
    #[error("cannot read or write the VAPID key {}: {source}", path.display())]
    KeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no randomness for a new VAPID key: {0}")]
    Random(String),
}

/// Where a push goes: a subscription, by its device.
#[derive(Clone)]
pub struct Target {
    /// The device the subscription is of (for logs and for [`Gone`]).
    pub device: String,
    /// Whose it is, for the rate limit.
    pub person: String,
    pub endpoint: String,
    /// The app's P-256 public key, uncompressed.
    pub p256dh: Vec<u8>,
    /// The app's auth secret (16 bytes).
    pub auth: Vec<u8>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// Told of each subscription the push service says no longer exists.
pub type Gone = Arc<dyn Fn(&str) + Send + Sync>;

/// How a [`Pusher`] behaves.
pub struct Settings {
    /// Who runs this server, for push services (RFC 8292 `sub`): a `mailto:` or
    /// `https:` URL.
    pub contact: String,
    /// Send to endpoints on private and loopback addresses (the owner's own service).
    pub allow_private: bool,
}

/// The sending side: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Pusher {
    queue: mpsc::Sender<Job>,
    key: Arc<VapidKey>,
    limit: Arc<Mutex<RateLimit>>,
}

struct Job {
    target: Target,
    payload: Vec<u8>,
    urgent: bool,
}

impl Pusher {
    /// Start the sender on the current runtime; `gone` hears of dead subscriptions.
    pub fn start(key: VapidKey, settings: Settings, gone: Gone) -> Pusher {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let key = Arc::new(key);
        tokio::spawn(run(jobs, key.clone(), settings, gone));
        Pusher {
            queue,
            key,
            limit: Arc::default(),
        }
    }

    /// The server's public key, for apps to subscribe with.
    pub fn public_key(&self) -> &str {
        self.key.public_key()
    }

    /// Queue `payload` for `target`; false when it was dropped (the queue is full, or
    /// the person has had their share of pushes for now).
    pub fn push(&self, target: Target, payload: Vec<u8>, urgent: bool) -> bool {
        if !self.limit_allows(&target.person) {
            debug!(device = %target.device, "push dropped: the person's rate limit");
            return false;
        }
        let job = Job {
            target,
            payload,
            urgent,
        };
        match self.queue.try_send(job) {
            Ok(()) => true,
            Err(err) => {
                let job = err.into_inner();
                warn!(device = %job.target.device, "push dropped: the queue is full");
                false
            }
        }
    }

    fn limit_allows(&self, person: &str) -> bool {
        let mut limit = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        limit.allows(person, Instant::now())
    }
}

/// Pushes per person within the last [`WINDOW`].
#[derive(Default)]
struct RateLimit {
    sent: HashMap<String, Vec<Instant>>,
}

impl RateLimit {
    fn allows(&mut self, person: &str, now: Instant) -> bool {
        // Whoever has nothing recent is forgotten, so the map stays as small as the
        // number of people pushed to within a window.
        self.sent.retain(|_, times| {
            times.retain(|t| now.duration_since(*t) < WINDOW);
            !times.is_empty()
        });
        let times = self.sent.entry(person.to_owned()).or_default();
        if times.len() >= PER_PERSON {
            return false;
        }
        times.push(now);
        true
    }
}

/// What every push is sent with: the key, the settings, and one HTTP client (its TLS
/// roots and connection pool made once, not for each push).
struct Sender {
    key: Arc<VapidKey>,
    settings: Settings,
    http: ureq::Agent,
}

async fn run(mut jobs: mpsc::Receiver<Job>, key: Arc<VapidKey>, settings: Settings, gone: Gone) {
    let http = ureq::Agent::config_builder()
        .timeout_global(Some(CALL_TIMEOUT))
        .http_status_as_error(false)
        .proxy(None)
        .max_redirects(0)
        .build()
        .new_agent();
    let sender = Arc::new(Sender {
        key,
        settings,
        http,
    });
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(job) = jobs.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (sender, gone) = (sender.clone(), gone.clone());
        tokio::spawn(async move {
            deliver(job, &sender, &gone).await;
            drop(slot);
        });
    }
}

/// Send one push, trying again on 429, 5xx and failures to connect.
async fn deliver(job: Job, sender: &Arc<Sender>, gone: &Gone) {
    let device = job.target.device.clone();
    for attempt in 1..=ATTEMPTS {
        let sender = sender.clone();
        let (target, payload) = (job.target.clone(), job.payload.clone());
        let urgent = job.urgent;
        let sent = tokio::task::spawn_blocking(move || send(&target, &payload, urgent, &sender))
            .await
            .unwrap_or(Sent::Failed("the sender stopped".into()));
        let wait = match sent {
            Sent::Delivered => {
                debug!(%device, "push delivered");
                return;
            }
            Sent::Gone => {
                info!(%device, "the push service no longer knows this subscription: dropped");
                gone(&device);
                return;
            }
            Sent::Refused(status) => {
                warn!(%device, status, "the push service refused a push");
                return;
            }
            Sent::Later(after) => after,
            Sent::Failed(why) if attempt < ATTEMPTS => {
                debug!(%device, %why, attempt, "push failed; trying again");
                Duration::from_secs(2u64.pow(attempt))
            }
            Sent::Failed(why) => {
                warn!(%device, %why, "push failed");
                return;
            }
        };
        if attempt < ATTEMPTS {
            tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
        }
    }
    warn!(%device, "push failed: the push service stayed busy");
}

/// What became of one attempt.
#[derive(Debug, PartialEq)]
enum Sent {
    Delivered,
    /// The subscription is no more (404, 410).
    Gone,
    /// Busy (429, 5xx): try again after this long.
    Later(Duration),
    /// Refused for good (another 4xx): the payload or our key is wrong.
    Refused(u16),
    /// Not reached, or the request could not be made.
    Failed(String),
}

/// Encrypt `payload` for `target`, sign, and send: blocking, for a blocking thread.
fn send(target: &Target, payload: &[u8], urgent: bool, sender: &Sender) -> Sent {
    let request = match request(target, payload, urgent, &sender.key, &sender.settings) {
        Ok(request) => request,
        Err(why) => return Sent::Failed(why),
    };
    match sender.http.run(request) {
        Ok(response) => classify(response.status().as_u16(), response.headers()),
        Err(err) => Sent::Failed(err.to_string()),
    }
}

/// The HTTP request for one push: encrypted body, VAPID authorization, TTL, urgency.
fn request(
    target: &Target,
    payload: &[u8],
    urgent: bool,
    key: &VapidKey,
    settings: &Settings,
) -> Result<http::Request<Vec<u8>>, String> {
    let uri: http::Uri = target
        .endpoint
        .parse()
        .map_err(|_| "not a URL".to_owned())?;
    let origin = origin(&uri).ok_or("no scheme or host")?;
    let private = uri
        .host()
        .is_some_and(|host| resolves_privately(host, uri.port_u16().unwrap_or(443)));
    if private && !settings.allow_private {
        return Err("the endpoint's host is on a private network".into());
    }
    build(target, uri, payload, urgent, key, settings, &origin)
}

fn build(
    target: &Target,
    uri: http::Uri,
    payload: &[u8],
    urgent: bool,
    key: &VapidKey,
    settings: &Settings,
    origin: &str,
) -> Result<http::Request<Vec<u8>>, String> {
    let public = PublicKey::from_sec1_bytes(&target.p256dh).map_err(|_| "bad p256dh")?;
    if target.auth.len() != 16 {
        return Err("bad auth secret".into());
    }
    let auth = Auth::clone_from_slice(&target.auth);
    let mut request = WebPushBuilder::new(uri, public, auth)
        .build(payload.to_vec())
        .map_err(|err| format!("cannot encrypt: {err:?}"))?;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let headers = request.headers_mut();
    let authorization = key.authorization(origin, &settings.contact, now_s);
    let value = |v: String| http::HeaderValue::from_str(&v).map_err(|_| "bad header".to_owned());
    headers.insert(http::header::AUTHORIZATION, value(authorization)?);
    headers.insert("ttl", value(TTL_SECONDS.to_string())?);
    let urgency = if urgent { "high" } else { "normal" };
    headers.insert("urgency", value(urgency.into())?);
    Ok(request)
}

/// `scheme://host[:port]` of `uri`: the audience of its VAPID token.
fn origin(uri: &http::Uri) -> Option<String> {
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?;
    Some(format!("{scheme}://{authority}"))
}

/// Whether `host` resolves to any address that is not on the public internet: a name
/// may point at this machine or the owner's network even where a literal could not.
fn resolves_privately(host: &str, port: u16) -> bool {
    use std::net::ToSocketAddrs;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs.into_iter().any(|addr| is_private(&addr.ip())),
        // Unresolvable now: the call will fail on its own.
        Err(_) => false,
    }
}

fn is_private(ip: &std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let v4 = |ip: &std::net::Ipv4Addr| {
        let [a, b, ..] = ip.octets();
        ip.is_loopback()
            || ip.is_private()
            || ip.is_link_local()
            || ip.is_unspecified()
            || (a == 100 && (64..128).contains(&b))
    };
    match ip {
        IpAddr::V4(ip) => v4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(mapped) => v4(&mapped),
            None => {
                let first = ip.segments()[0];
                ip.is_loopback()
                    || ip.is_unspecified()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
            }
        },
    }
}

fn classify(status: u16, headers: &http::HeaderMap) -> Sent {
    match status {
        200..=299 => Sent::Delivered,
        404 | 410 => Sent::Gone,
        429 | 500..=599 => {
            let after = headers
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(Duration::from_secs(2), Duration::from_secs);
            Sent::Later(after)
        }
        _ => Sent::Refused(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answers_of_a_push_service_mean_what_rfc_8030_says() {
        let none = http::HeaderMap::new();
        assert_eq!(classify(201, &none), Sent::Delivered);
        assert_eq!(classify(410, &none), Sent::Gone);
        assert_eq!(classify(404, &none), Sent::Gone);
        assert_eq!(classify(413, &none), Sent::Refused(413));
        let mut busy = http::HeaderMap::new();
        busy.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("7"),
        );
        assert_eq!(classify(429, &busy), Sent::Later(Duration::from_secs(7)));
        assert_eq!(classify(503, &none), Sent::Later(Duration::from_secs(2)));
    }

    #[test]
    fn a_person_gets_their_share_of_pushes_per_window_and_then_again() {
        let mut limit = RateLimit::default();
        let start = Instant::now();
        for _ in 0..PER_PERSON {
            assert!(limit.allows("u-a", start));
        }
        assert!(!limit.allows("u-a", start));
        assert!(limit.allows("u-b", start), "per person");
        assert!(limit.allows("u-a", start + WINDOW));
    }

    /// A push service on loopback that answers each push with the next of `answers`
    /// (status, `Retry-After`), then 201; the statuses it gave, in order.
    async fn service(answers: Vec<(u16, Option<u64>)>) -> (String, Arc<Mutex<Vec<u16>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/push/1", listener.local_addr().unwrap());
        let given = Arc::new(Mutex::new(Vec::new()));
        let log = given.clone();
        tokio::spawn(async move {
            let mut answers = answers.into_iter();
            while let Ok((mut socket, _)) = listener.accept().await {
                // Read the head, then as much body as it announces.
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let body_at = loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the request ended early");
                    seen.extend_from_slice(&buf[..n]);
                    if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                };
                let head = String::from_utf8_lossy(&seen[..body_at]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                while seen.len() < body_at + length {
                    let n = socket.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the body ended early");
                    seen.extend_from_slice(&buf[..n]);
                }
                let (status, after) = answers.next().unwrap_or((201, None));
                log.lock().unwrap().push(status);
                let after = after.map_or(String::new(), |s| format!("retry-after: {s}\r\n"));
                let reply = format!(
                    "HTTP/1.1 {status} X\r\n{after}content-length: 0\r\nconnection: close\r\n\r\n"
                );
                socket.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        (endpoint, given)
    }

    /// A pusher to `endpoint` and a subscription's target there; the devices it was
    /// told are gone.
    fn pusher(dir: &std::path::Path, endpoint: &str) -> (Pusher, Target, Arc<Mutex<Vec<String>>>) {
        let key = VapidKey::load_or_create(&dir.join("vapid.key")).unwrap();
        let settings = Settings {
            contact: "mailto:owner@example.org".into(),
            allow_private: true,
        };
        let gone = Arc::new(Mutex::new(Vec::new()));
        let told = gone.clone();
        let pusher = Pusher::start(
            key,
            settings,
            Arc::new(move |device: &str| told.lock().unwrap().push(device.to_owned())),
        );
        let app = p256::SecretKey::from_slice(&[9; 32]).unwrap();
        let target = Target {
            device: "tel-1".into(),
            person: "owner".into(),
            endpoint: endpoint.into(),
            p256dh: app.public_key().to_sec1_bytes().to_vec(),
            auth: vec![7; 16],
        };
        (pusher, target, gone)
    }

    /// Wait until `given` holds `n` answers.
    async fn answered(given: &Mutex<Vec<u16>>, n: usize) {
        for _ in 0..500 {
            if given.lock().unwrap().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{n} answers expected: {:?}", given.lock().unwrap());
    }

    #[tokio::test]
    async fn a_busy_push_service_is_tried_again_and_a_gone_subscription_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // Busy twice (503, then 429 with a Retry-After), then taken: three calls.
        let (endpoint, given) = service(vec![(503, Some(0)), (429, Some(0))]).await;
        let (pusher, target, gone) = pusher(dir.path(), &endpoint);
        assert!(pusher.push(target.clone(), b"{}".to_vec(), true));
        answered(&given, 3).await;
        assert_eq!(*given.lock().unwrap(), [503, 429, 201]);

        // Busy on every try: ATTEMPTS calls, then given up, the subscription kept.
        let busy = vec![(500, Some(0)); ATTEMPTS as usize + 1];
        let (endpoint, given) = service(busy).await;
        let to_busy = Target {
            endpoint,
            ..target.clone()
        };
        assert!(pusher.push(to_busy, b"{}".to_vec(), false));
        answered(&given, ATTEMPTS as usize).await;
        // Then a push the service calls gone: one call, and the device named.
        let (endpoint, gone_given) = service(vec![(410, None)]).await;
        assert!(pusher.push(Target { endpoint, ..target }, b"{}".to_vec(), false));
        answered(&gone_given, 1).await;
        for _ in 0..500 {
            if !gone.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(*gone.lock().unwrap(), ["tel-1"]);
        assert_eq!(
            given.lock().unwrap().len(),
            ATTEMPTS as usize,
            "no call after the last try"
        );
        assert_eq!(
            gone_given.lock().unwrap().len(),
            1,
            "a gone subscription is not tried again"
        );
    }

    #[test]
    fn names_on_private_networks_are_caught_when_they_resolve() {
        assert!(resolves_privately("localhost", 443));
        assert!(resolves_privately("127.0.0.1", 443));
        assert!(resolves_privately("[::1]", 443));
        assert!(!resolves_privately("203.0.113.9", 443));
    }
}
