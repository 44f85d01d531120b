//! The HTTP/1.1 request that opens every connection to a device listener.
//!
//! Herald reads it itself instead of leaving it to the WebSocket library, because
//! not every request is an upgrade: supervisors ask `/healthz`, a person opens the URL
//! in a browser, a proxy probes it. Those get a plain answer (`426 Upgrade Required` on
//! the WebSocket path, a page, or `404`) instead of a closed connection, and an upgrade
//! is answered with `101` here before the socket becomes a WebSocket.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

pub use herald_pages::{Page, HEALTH};

/// The largest request head accepted; devices and browsers send well under 2 KiB.
const MAX_HEAD: usize = 8 * 1024;
/// Headers looked at; a request with more is refused.
const MAX_HEADERS: usize = 32;
/// What Herald needs of a request head.
#[derive(Debug, Default)]
pub struct Head {
    pub method: String,
    /// Without the query, and without one trailing slash (`/gadget/` is `/gadget`).
    pub path: String,
    pub query: Option<String>,
    /// `Upgrade: websocket` was asked for.
    pub websocket: bool,
    connection_upgrade: bool,
    http11: bool,
    key: Option<String>,
    version: Option<String>,
    protocols: Vec<String>,
}

/// Why a request head could not be read.
#[derive(Debug)]
pub enum HeadError {
    /// Not HTTP, or too large: answered with this status before closing.
    Bad(u16, &'static str),
    /// The peer closed or the read failed: nothing to answer.
    Gone,
}

impl Head {
    /// Whether the client offered this WebSocket subprotocol.
    pub fn offers(&self, subprotocol: &str) -> bool {
        self.protocols.iter().any(|p| p == subprotocol)
    }

    /// A valid RFC 6455 upgrade request, or the status and reason to refuse it with.
    fn upgrade_key(&self) -> Result<&str, (u16, &'static str)> {
        if self.method != "GET" || !self.http11 || !self.connection_upgrade {
            return Err((
                400,
                "a WebSocket upgrade is a GET over HTTP/1.1 with Connection: Upgrade",
            ));
        }
        if self.version.as_deref() != Some("13") {
            return Err((426, "this server speaks WebSocket version 13"));
        }
        match self.key.as_deref() {
            Some(key) if !key.is_empty() => Ok(key),
            _ => Err((400, "Sec-WebSocket-Key is missing")),
        }
    }
}

/// Read one request head. Bytes after it are returned too: a client may send its first
/// frame without waiting for the `101`.
pub async fn read_head<S>(stream: &mut S) -> Result<(Head, Vec<u8>), HeadError>
where
    S: AsyncRead + Unpin,
{
    // Read straight into the heap: a buffer on the stack would live in every
    // connection's task.
    let mut buf = Vec::with_capacity(1024);
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(1024);
        }
        let n = stream
            .read_buf(&mut buf)
            .await
            .map_err(|_| HeadError::Gone)?;
        if n == 0 {
            return Err(HeadError::Gone);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head::from_parsed(&request);
                return Ok((head, buf.split_off(len)));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                return Err(HeadError::Bad(431, "request head too large"))
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(HeadError::Bad(431, "too many headers"))
            }
            Err(_) => return Err(HeadError::Bad(400, "not an HTTP request")),
        }
    }
}

impl Head {
    fn from_parsed(request: &httparse::Request<'_, '_>) -> Head {
        let target = request.path.unwrap_or("/");
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query.to_owned())),
            None => (target, None),
        };
        let mut head = Head {
            method: request.method.unwrap_or("").to_owned(),
            path: normalize(path).to_owned(),
            query,
            http11: request.version == Some(1),
            ..Head::default()
        };
        for header in request.headers.iter() {
            let Ok(value) = std::str::from_utf8(header.value) else {
                continue;
            };
            let tokens = || value.split(',').map(str::trim);
            let name = header.name;
            if name.eq_ignore_ascii_case("upgrade") {
                head.websocket |= tokens().any(|t| t.eq_ignore_ascii_case("websocket"));
            } else if name.eq_ignore_ascii_case("connection") {
                head.connection_upgrade |= tokens().any(|t| t.eq_ignore_ascii_case("upgrade"));
            } else if name.eq_ignore_ascii_case("sec-websocket-key") {
                head.key = Some(value.trim().to_owned());
            } else if name.eq_ignore_ascii_case("sec-websocket-version") {
                head.version = Some(value.trim().to_owned());
            } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                head.protocols.extend(tokens().map(str::to_owned));
            }
        }
        head
    }
}

/// `/gadget/` as devices type it is `/gadget`; `/` stays `/`.
pub fn normalize(path: &str) -> &str {
    match path.strip_suffix('/') {
        Some(stripped) if !stripped.is_empty() => stripped,
        _ => path,
    }
}

/// Accept a WebSocket upgrade: write the `101`, echoing `subprotocol` when given.
/// Returns the status and reason to refuse with when the request is not a valid upgrade.
pub async fn accept_upgrade<S>(
    stream: &mut S,
    head: &Head,
    subprotocol: Option<&str>,
) -> Result<(), UpgradeError>
where
    S: AsyncWrite + Unpin,
{
    let key = head
        .upgrade_key()
        .map_err(|(status, reason)| UpgradeError::Refused(status, reason))?;
    let mut response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n",
        derive_accept_key(key.as_bytes())
    );
    if let Some(protocol) = subprotocol {
        response.push_str("Sec-WebSocket-Protocol: ");
        response.push_str(protocol);
        response.push_str("\r\n");
    }
    response.push_str("\r\n");
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(|_| UpgradeError::Gone)?;
    stream.flush().await.map_err(|_| UpgradeError::Gone)
}

#[derive(Debug)]
pub enum UpgradeError {
    Refused(u16, &'static str),
    Gone,
}

/// A complete plain response; the connection closes after it.
pub struct Response<'a> {
    pub status: u16,
    pub content_type: &'a str,
    pub body: &'a [u8],
    /// One extra header line (`Name: value`), for `426` and `405`.
    pub header: Option<&'a str>,
}

impl<'a> Response<'a> {
    pub fn text(status: u16, body: &'a str) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes(),
            header: None,
        }
    }
}

/// Write `response` (without its body for `HEAD`), then close.
pub async fn respond<S>(stream: &mut S, response: Response<'_>, head_only: bool)
where
    S: AsyncWrite + Unpin,
{
    let mut text = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    if let Some(header) = response.header {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    let mut bytes = text.into_bytes();
    if !head_only {
        bytes.extend_from_slice(response.body);
    }
    // The peer may be gone already; there is nobody to tell.
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(request: &str) -> Result<(Head, Vec<u8>), HeadError> {
        let mut input = request.as_bytes();
        read_head(&mut input).await
    }

    #[tokio::test]
    async fn reads_an_upgrade_and_keeps_the_bytes_after_it() {
        let (head, rest) = parse(
            "GET /gadget/?x=1 HTTP/1.1\r\nHost: h\r\nUpgrade: WebSocket\r\n\
             Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: a, hermes-gadget.v1\r\n\r\nEXTRA",
        )
        .await
        .unwrap();
        assert_eq!(head.path, "/gadget");
        assert_eq!(head.query.as_deref(), Some("x=1"));
        assert!(head.websocket && head.offers("hermes-gadget.v1") && !head.offers("b"));
        assert_eq!(head.upgrade_key().unwrap(), "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(rest, b"EXTRA");
    }

    #[tokio::test]
    async fn refuses_what_is_not_a_websocket_upgrade() {
        let (head, _) = parse("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(head.upgrade_key().unwrap_err().0, 400);
        let (head, _) = parse(
            "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\
             Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 8\r\n\r\n",
        )
        .await
        .unwrap();
        assert_eq!(head.upgrade_key().unwrap_err().0, 426);
        let (head, _) = parse("GET /ws HTTP/1.0\r\n\r\n").await.unwrap();
        assert!(!head.websocket);
        assert!(head.upgrade_key().is_err());
    }

    #[tokio::test]
    async fn bad_and_oversized_heads_get_a_status() {
        assert!(matches!(
            parse("\x16\x03\x01 hello\r\n\r\n").await,
            Err(HeadError::Bad(400, _))
        ));
        let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(parse(&huge).await, Err(HeadError::Bad(431, _))));
        let many: String = (0..40).map(|i| format!("H{i}: v\r\n")).collect();
        let request = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(parse(&request).await, Err(HeadError::Bad(431, _))));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\n").await,
            Err(HeadError::Gone)
        ));
    }

    #[test]
    fn one_trailing_slash_is_dropped() {
        assert_eq!(normalize("/gadget/"), "/gadget");
        assert_eq!(normalize("/gadget"), "/gadget");
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize("/a//"), "/a/");
    }

    #[tokio::test]
    async fn plain_responses_carry_length_and_close() {
        let mut out = Vec::new();
        respond(&mut out, Response::text(426, "use a WebSocket\n"), false).await;
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
        assert!(text.contains("Content-Length: 16\r\n") && text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nuse a WebSocket\n"));
        let mut out = Vec::new();
        respond(&mut out, Response::text(200, "body"), true).await;
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Content-Length: 4\r\n") && text.ends_with("\r\n\r\n"));
    }
}
