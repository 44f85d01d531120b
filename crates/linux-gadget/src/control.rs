//! The control socket: scripts on the same machine drive the running gadget through
//! `control.sock` in its state directory.
//!
//! The socket is a Unix socket, mode 0600 inside the 0700 state directory, so only the
//! service's user (and root) can talk to it. Each connection carries one request, a JSON
//! line, and gets one answer, a JSON line: `{"ok": true, ...}` or
//! `{"ok": false, "error": "..."}`. Requests are at most [`MAX_REQUEST`] bytes and take
//! at most [`REQUEST_TIME`]; at most [`MAX_CLIENTS`] are served at once.
//!
//! | request | what it does |
//! |---|---|
//! | `{"op": "say", "text": T}` | sends T to the agent, as typed on the device |
//! | `{"op": "event", "name": N, "data": D, "notify": B}` | sends an `event`; with notify the agent hears it |
//! | `{"op": "press", "button": B, "hold_ms": H}` | presses B (talk, cancel, up, down) for H ms (100) |
//! | `{"op": "status"}` | the device's state, outputs and last replies |

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herald_device::Button;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use super::status::Status;
use herald_sim::runner::{Command, Handle};

/// The socket's name in the state directory.
pub const SOCKET: &str = "control.sock";
/// Longest request line.
pub const MAX_REQUEST: u64 = 64 * 1024;
/// Longest answer line the client reads.
const MAX_ANSWER: u64 = 1024 * 1024;
/// Time to send a request, longest press included.
const REQUEST_TIME: Duration = Duration::from_secs(15);
/// Longest press.
const MAX_HOLD_MS: u64 = 10_000;
/// Clients served at once.
const MAX_CLIENTS: usize = 8;

/// Why the control socket failed, on either end.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no gadget runs on {path} ({source}); is `herald gadget run` started with this state directory?")]
    NotRunning {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the control socket {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the control socket failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the gadget's answer is not understood: {0}")]
    Answer(String),
    #[error("the gadget did not answer in time")]
    Timeout,
}

/// One request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Say {
        text: String,
    },
    Event {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Value>,
        #[serde(default)]
        notify: bool,
    },
    Press {
        button: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold_ms: Option<u64>,
    },
    Status,
}

/// Binds the socket at `path` (a stale one is removed: the caller holds the state
/// directory's lock), readable and writable by its owner only.
pub fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    use std::os::unix::fs::PermissionsExt;
    let bind_error = |source| ControlError::Bind {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(bind_error(e)),
        _ => {}
    }
    let listener = UnixListener::bind(path).map_err(bind_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    Ok(listener)
}

/// Serves requests until the task is dropped.
pub async fn serve(listener: UnixListener, handle: Handle, status: Arc<Status>) {
    let slots = Arc::new(Semaphore::new(MAX_CLIENTS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("control socket: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Busy: the client sees the connection close without an answer.
            continue;
        };
        let (handle, status) = (handle.clone(), status.clone());
        tokio::spawn(async move {
            let _slot = slot;
            if tokio::time::timeout(REQUEST_TIME, answer(stream, &handle, &status))
                .await
                .is_err()
            {
                tracing::debug!("control request timed out");
            }
        });
    }
}

async fn answer(stream: UnixStream, handle: &Handle, status: &Status) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let reply = match BufReader::new(read.take(MAX_REQUEST))
        .read_line(&mut line)
        .await
    {
        Ok(_) if !line.ends_with('\n') => {
            Err("the request must be one line of JSON, at most 64 KiB".to_owned())
        }
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(request) => run(request, handle, status).await,
            Err(e) => Err(format!("not a request: {e}")),
        },
        Err(e) => Err(format!("cannot read the request: {e}")),
    };
    let mut answer = match reply {
        Ok(Value::Object(mut fields)) => {
            fields.insert("ok".to_owned(), Value::Bool(true));
            Value::Object(fields)
        }
        Ok(_) => serde_json::json!({"ok": true}),
        Err(error) => serde_json::json!({"ok": false, "error": error}),
    }
    .to_string();
    answer.push('\n');
    let _ = write.write_all(answer.as_bytes()).await;
}

async fn run(request: Request, handle: &Handle, status: &Status) -> Result<Value, String> {
    match request {
        Request::Say { text } => handle.run(Command::Text(text)).await.map(|()| Value::Null),
        Request::Event { name, data, notify } => handle
            .run(Command::Event { name, data, notify })
            .await
            .map(|()| Value::Null),
        Request::Press { button, hold_ms } => {
            let button = Button::from_name(&button)
                .ok_or_else(|| format!("no button {button}: talk, cancel, up or down"))?;
            let hold = hold_ms.unwrap_or(100).min(MAX_HOLD_MS);
            handle.run(Command::Press(button)).await?;
            tokio::time::sleep(Duration::from_millis(hold)).await;
            handle
                .run(Command::Release(button))
                .await
                .map(|()| Value::Null)
        }
        Request::Status => Ok(status.to_json(&handle.snapshot().borrow())),
    }
}

/// Sends `request` to the gadget whose socket is `path`; returns its answer's fields.
pub fn request(path: &Path, request: &Request) -> Result<Result<Value, String>, ControlError> {
    use std::io::{BufRead, Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(path).map_err(|source| {
        ControlError::NotRunning {
            path: path.to_owned(),
            source,
        }
    })?;
    stream.set_read_timeout(Some(REQUEST_TIME + Duration::from_secs(1)))?;
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    let mut line =
        serde_json::to_string(request).map_err(|e| ControlError::Answer(e.to_string()))?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    match std::io::BufReader::new(stream.take(MAX_ANSWER)).read_line(&mut answer) {
        Err(e)
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            return Err(ControlError::Timeout)
        }
        other => other?,
    };
    let value: Value =
        serde_json::from_str(&answer).map_err(|e| ControlError::Answer(e.to_string()))?;
    match value.get("ok").and_then(Value::as_bool) {
        Some(true) => Ok(Ok(value)),
        Some(false) => Ok(Err(value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("failed")
            .to_owned())),
        None => Err(ControlError::Answer(answer.trim().to_owned())),
    }
}
