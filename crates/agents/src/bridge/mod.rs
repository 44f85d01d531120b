//! The Hermes bridge: the agent backend of `herald serve --backend bridge`, which the
//! Herald plugin for Hermes starts as its child process.
//!
//! Hermes's side is Python and holds no protocol logic; this backend turns the
//! conversation port into JSON lines on herald's stdin and stdout and back:
//!
//! - as the [`Agent`], every [`Inbound`] becomes an `inbound` event line;
//! - as the [`Authorizer`], `is_authorized` and `pairing_code` become request lines that
//!   Hermes answers from its own allowlists and pairing store, and so do the console's
//!   `pairings`, `approve_pairing` and `revoke_pairing`;
//! - request lines from Hermes (`send_text`, `ask`, `invoke_action`, …) are carried out
//!   on the [`Outbound`] the server built the backend with, and answered by id.
//!
//! The pipes are the channel because nothing else on the machine can reach them. The
//! first line herald writes is the `ready` event; when stdin ends (Hermes stopped, or
//! died) [`Bridge::run`] returns and herald shuts down. `plugin/DESIGN.md` in the
//! repository describes the line format; `wire.rs` holds it as types.
//!
//! Hermes stores only a hash of each pairing code, so the plaintext code is kept here,
//! in memory, until it expires: a device that reconnects shows the same code instead of
//! asking Hermes again (which would refuse: one code per user per ten minutes). After a
//! restart of herald a device asks anew.

mod lines;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use herald_port::{
    AccessError, Agent, AgentFactory, Authorizer, Backend, Inbound, Outbound, PairingCode,
    PairingRecord, Platform,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;
use tracing::{debug, warn};

use wire::{
    ApprovedPairing, Authorized, ErrorKind, Event, HermesPairings, HermesRequest, HermesUser,
    IssuedCode, Line, OutLine, Question, RequestId, RevokedPairing, WireDevice, WireError,
    WireInbound,
};
pub use wire::{Ready, PROTOCOL};

/// The line parsing, for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::lines::{read_line, Read};
    use super::wire::{ErrorKind, HermesRequest, Line, OutLine, RequestId, WireError};

    /// Decodes a line from Hermes as [`super::Bridge`] does, without carrying anything
    /// out: the answer herald writes for a request it cannot decode, if it is one.
    pub fn refusal(line: &[u8]) -> Option<String> {
        match serde_json::from_slice::<Line>(line) {
            Ok(Line::Request { id, op, args }) => HermesRequest::decode(op, args)
                .err()
                .map(|error| OutLine::answer(id, Err(error)).encode()),
            Ok(Line::Response { .. } | Line::Event { .. }) => None,
            Err(err) => match serde_json::from_slice::<RequestId>(line) {
                Ok(RequestId { kind, id: Some(id) }) if kind == "request" => {
                    let error = WireError::new(ErrorKind::BadRequest, err.to_string());
                    Some(OutLine::answer(id, Err(error)).encode())
                }
                _ => None,
            },
        }
    }
}

/// The longest line either side sends; longer ones are dropped.
pub const MAX_LINE: usize = 1 << 20;
/// How long herald waits for Hermes to answer a question.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines waiting for stdout before their senders wait.
const OUTGOING: usize = 256;
/// Requests from Hermes carried out at once; more are refused as `unavailable`, which
/// the plugin reports as a failure worth retrying.
const CONCURRENT_REQUESTS: usize = 64;
/// A pairing code is kept no longer than this, whatever Hermes says.
const MAX_CODE_TTL: Duration = Duration::from_secs(24 * 3600);

type Answer = Result<Value, WireError>;

/// The bridge backend; see the module docs.
pub struct Bridge {
    out: Arc<dyn Outbound>,
    lines: mpsc::Sender<String>,
    /// Taken by [`Bridge::run`], which writes the lines.
    outgoing: Mutex<Option<mpsc::Receiver<String>>>,
    /// Questions to Hermes waiting for their answer, by request id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    next_id: AtomicU64,
    /// Pairing codes Hermes issued, until they expire; held across the request, so two
    /// messages of one new user ask Hermes once.
    codes: tokio::sync::Mutex<HashMap<(Platform, String), IssuedPairing>>,
}

struct IssuedPairing {
    code: PairingCode,
    user_name: Option<String>,
    /// Wall-clock milliseconds, for the console.
    issued_at: i64,
    expires: Instant,
}

impl Bridge {
    pub fn new(out: Arc<dyn Outbound>) -> Arc<Bridge> {
        let (lines, outgoing) = mpsc::channel(OUTGOING);
        Arc::new(Bridge {
            out,
            lines,
            outgoing: Mutex::new(Some(outgoing)),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            codes: tokio::sync::Mutex::default(),
        })
    }

    /// A factory for the server, and the bridge it builds (to [`Bridge::run`] once the
    /// server is up).
    pub fn factory() -> (AgentFactory, oneshot::Receiver<Arc<Bridge>>) {
        let (built, bridge) = oneshot::channel();
        let factory: AgentFactory = Box::new(move |out| {
            let bridge = Bridge::new(out);
            let _ = built.send(bridge.clone());
            Backend {
                agent: bridge.clone(),
                authorizer: Some(bridge),
            }
        });
        (factory, bridge)
    }

    /// Write `ready`, then carry lines both ways until `input` ends (or `output` fails).
    /// Lines produced before this starts wait, so `ready` is always the first.
    pub async fn run<R, W>(
        self: &Arc<Self>,
        input: R,
        output: W,
        ready: Ready,
    ) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let outgoing = self
            .outgoing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| std::io::Error::other("the bridge is already running"))?;
        let result = tokio::select! {
            read = self.read(input) => read,
            written = write(outgoing, output, ready) => written,
        };
        // Nobody is left to answer: questions fail now rather than at their timeout.
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        result
    }

    async fn read<R: AsyncRead + Unpin>(self: &Arc<Self>, input: R) -> std::io::Result<()> {
        let mut input = BufReader::new(input);
        let permits = Arc::new(Semaphore::new(CONCURRENT_REQUESTS));
        loop {
            match lines::read_line(&mut input, MAX_LINE).await? {
                lines::Read::End => return Ok(()),
                lines::Read::TooLong => warn!("dropped a line from Hermes over {MAX_LINE} bytes"),
                lines::Read::Line(line) => self.on_line(&line, &permits).await,
            }
        }
    }

    async fn on_line(self: &Arc<Self>, line: &[u8], permits: &Arc<Semaphore>) {
        match serde_json::from_slice::<Line>(line) {
            Ok(Line::Response {
                id,
                ok,
                result,
                error,
            }) => {
                let waiting = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                let answer = match (ok, error) {
                    (true, _) => Ok(result),
                    (false, Some(error)) => Err(error),
                    (false, None) => Err(WireError::new(ErrorKind::Failed, "no reason given")),
                };
                match waiting {
                    Some(waiting) => {
                        let _ = waiting.send(answer);
                    }
                    None => debug!(id, "an answer nobody waits for (any more)"),
                }
            }
            Ok(Line::Request { id, op, args }) => {
                // Refused rather than queued: the reader must stay free for answers.
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    let busy = format!("{CONCURRENT_REQUESTS} requests are already running");
                    let error = WireError::new(ErrorKind::Unavailable, busy);
                    self.send(OutLine::answer(id, Err(error))).await;
                    return;
                };
                let bridge = self.clone();
                tokio::spawn(async move {
                    let answer = match HermesRequest::decode(op, args) {
                        Ok(request) => bridge.execute(request).await,
                        Err(err) => Err(err),
                    };
                    bridge.send(OutLine::answer(id, answer)).await;
                    drop(permit);
                });
            }
            // In the reader, so news reaches the device before what Hermes sends next.
            Ok(Line::Event { op, args }) => match wire::decode_notification(op, args) {
                Ok((chat, notification)) => self.out.notify(&chat, notification).await,
                Err(err) => warn!(%err, "dropped an event from Hermes that is not the protocol"),
            },
            Err(err) => match serde_json::from_slice::<RequestId>(line) {
                Ok(RequestId { kind, id: Some(id) }) if kind == "request" => {
                    let error = WireError::new(ErrorKind::BadRequest, err.to_string());
                    self.send(OutLine::answer(id, Err(error))).await;
                }
                _ => warn!(%err, "dropped a line from Hermes that is not the protocol"),
            },
        }
    }

    /// Carry out one request from Hermes on the devices.
    async fn execute(&self, request: HermesRequest) -> Answer {
        let out = &*self.out;
        Ok(match request {
            HermesRequest::Device { chat, request } => {
                let response = out.request(&chat, request).await?;
                serde_json::to_value(response)
                    .map_err(|err| WireError::new(ErrorKind::Failed, err.to_string()))?
            }
            HermesRequest::SetAuthorized {
                platform,
                user_id,
                authorized,
            } => {
                // The code was used (or is moot); an unpaired device must get a fresh one.
                self.codes.lock().await.remove(&(platform, user_id.clone()));
                out.set_authorized(platform, &user_id, authorized).await;
                json!({})
            }
            HermesRequest::Devices { platform } => {
                let devices: Vec<WireDevice> = out
                    .devices()
                    .await?
                    .into_iter()
                    .filter(|device| platform.is_none_or(|p| p == device.chat.platform))
                    .map(WireDevice::from)
                    .collect();
                json!({ "devices": devices })
            }
        })
    }

    /// Queue a line for stdout; one too long for the peer is replaced or dropped.
    async fn send(&self, line: OutLine<'_>) {
        let mut text = line.encode();
        if text.len() > MAX_LINE {
            match line {
                OutLine::Response { id, .. } => {
                    let error = WireError::new(ErrorKind::Failed, "the answer is too large");
                    text = OutLine::answer(id, Err(error)).encode();
                }
                _ => {
                    warn!(bytes = text.len(), "dropped a line too long for Hermes");
                    return;
                }
            }
        }
        if self.lines.send(text).await.is_err() {
            debug!("the bridge has stopped; line dropped");
        }
    }

    /// Ask Hermes something and wait for its answer.
    async fn ask<T: DeserializeOwned>(&self, question: Question<'_>) -> Result<T, WireError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, answer);
        let _forget = Forget { bridge: self, id };
        self.send(OutLine::Request { id, question }).await;
        let result = match tokio::time::timeout(ANSWER_TIMEOUT, answered).await {
            Err(_) => {
                let waited = ANSWER_TIMEOUT.as_secs();
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!("Hermes did not answer in {waited} s"),
                ));
            }
            Ok(Err(_)) => return Err(WireError::new(ErrorKind::Unavailable, "Hermes went away")),
            Ok(Ok(answer)) => answer?,
        };
        serde_json::from_value(result).map_err(|err| {
            WireError::new(ErrorKind::BadRequest, format!("unexpected answer: {err}"))
        })
    }
}

/// Removes a question from the pending ones however its wait ends.
struct Forget<'a> {
    bridge: &'a Bridge,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.bridge
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

async fn write<W: AsyncWrite + Unpin>(
    mut outgoing: mpsc::Receiver<String>,
    mut output: W,
    ready: Ready,
) -> std::io::Result<()> {
    let ready = OutLine::Event {
        event: Event::Ready(ready),
    };
    let mut line = ready.encode();
    loop {
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
        match outgoing.recv().await {
            Some(next) => line = next,
            // The bridge itself holds a sender, so this is only reached once it is gone.
            None => return Ok(()),
        }
    }
}

#[async_trait]
impl Agent for Bridge {
    async fn handle(&self, inbound: Inbound) {
        let event = Event::Inbound(WireInbound::from(&inbound));
        self.send(OutLine::Event { event }).await;
    }
}

#[async_trait]
impl Authorizer for Bridge {
    async fn is_authorized(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError> {
        let answer: Authorized = self
            .ask(Question::IsAuthorized { platform, user_id })
            .await?;
        Ok(answer.authorized)
    }

    async fn pairing_code(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
    ) -> Result<PairingCode, AccessError> {
        let mut codes = self.codes.lock().await;
        let now = Instant::now();
        codes.retain(|_, issued| issued.expires > now);
        let key = (platform, user_id.to_owned());
        if let Some(issued) = codes.get(&key) {
            return Ok(issued.code.clone());
        }
        let issued: IssuedCode = self
            .ask(Question::PairingCode {
                platform,
                user_id,
                user_name,
            })
            .await?;
        let code = PairingCode {
            code: issued.code,
            command: issued.command,
        };
        let ttl = Duration::from_secs(issued.ttl_s).min(MAX_CODE_TTL);
        codes.insert(
            key,
            IssuedPairing {
                code: code.clone(),
                user_name: user_name.map(str::to_owned),
                issued_at: wall_clock_ms(),
                expires: now + ttl,
            },
        );
        Ok(code)
    }

    /// Hermes keeps only hashes of its codes, so the waiting ones are those herald
    /// showed; the approved ones are Hermes's, for each platform Hermes serves.
    async fn pairings(&self) -> Result<Vec<PairingRecord>, AccessError> {
        let mut approved = Vec::new();
        for platform in [Platform::Gadget, Platform::Mobile] {
            match self
                .ask::<HermesPairings>(Question::Pairings { platform })
                .await
            {
                Ok(answer) => approved.extend(
                    answer
                        .approved
                        .into_iter()
                        .map(|user| approved_record(platform, user)),
                ),
                // Hermes may serve only one of the platforms.
                Err(err) if err.kind == ErrorKind::Denied => {}
                Err(err) => return Err(err.into()),
            }
        }
        let mut codes = self.codes.lock().await;
        let now = Instant::now();
        codes.retain(|_, issued| issued.expires > now);
        let mut pairings: Vec<PairingRecord> = codes
            .iter()
            .filter(|((platform, user), _)| {
                !approved
                    .iter()
                    .any(|a| a.platform == *platform && a.user_id == *user)
            })
            .map(|((platform, user_id), issued)| PairingRecord {
                platform: *platform,
                user_id: user_id.clone(),
                user_name: issued.user_name.clone(),
                code: Some(issued.code.code.clone()),
                created_at: issued.issued_at,
                approved_at: None,
            })
            .collect();
        pairings.sort_by_key(|p| p.created_at);
        pairings.extend(approved);
        Ok(pairings)
    }

    async fn approve_code(
        &self,
        platform: Platform,
        code: &str,
    ) -> Result<Option<PairingRecord>, AccessError> {
        let code = code.trim().to_ascii_uppercase();
        let answer: ApprovedPairing = self
            .ask(Question::ApprovePairing {
                platform,
                code: &code,
            })
            .await?;
        let Some(user) = answer.approved else {
            return Ok(None);
        };
        let issued = self
            .codes
            .lock()
            .await
            .remove(&(platform, user.user_id.clone()));
        let mut record = approved_record(platform, user);
        if let Some(issued) = issued {
            record.created_at = issued.issued_at;
            record.user_name = record.user_name.or(issued.user_name);
        }
        Ok(Some(record))
    }

    async fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError> {
        let waiting = self
            .codes
            .lock()
            .await
            .remove(&(platform, user_id.to_owned()))
            .is_some();
        let answer: RevokedPairing = self
            .ask(Question::RevokePairing { platform, user_id })
            .await?;
        Ok(waiting || answer.revoked)
    }
}

/// A user Hermes approved, as the console lists it.
fn approved_record(platform: Platform, user: HermesUser) -> PairingRecord {
    // Hermes keeps seconds as a float; when it says nothing, the approval is now.
    let approved_at = user
        .approved_at
        .map_or_else(wall_clock_ms, |s| (s * 1000.0) as i64);
    PairingRecord {
        platform,
        user_id: user.user_id,
        user_name: user.user_name.filter(|name| !name.is_empty()),
        code: None,
        created_at: approved_at,
        approved_at: Some(approved_at),
    }
}

fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
