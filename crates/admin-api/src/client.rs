//! The one client of the admin API: it finds the server through the data directory
//! ([`Endpoint::discover`]), sends the token with every call, and turns a refusal into
//! the server's own words.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use ureq::http::Method;

use crate::{Endpoint, ErrorBody};

/// Long enough for any call the API answers at once; a server that takes longer is stuck.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why the admin API gave no answer to use.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No server runs on the data directory (no endpoint file, or no token beside it).
    #[error(
        "herald is not running with data directory {} (start it with `herald serve`)",
        data_dir.display()
    )]
    NotRunning {
        data_dir: PathBuf,
        source: std::io::Error,
    },
    /// The data directory is another user's: only they can reach its server.
    #[error(
        "the data directory {} belongs to {owner}: run this as {owner} (for example \
         `sudo -u {owner} herald …`), the user that runs `herald serve`",
        data_dir.display()
    )]
    WrongUser { data_dir: PathBuf, owner: String },
    /// The endpoint file names a server that does not answer.
    #[error("cannot reach herald's admin API at {url} (is `herald serve` running?): {err}")]
    Unreachable { url: String, err: Box<ureq::Error> },
    /// The server answered, and said no: what `herald send` reports as "not delivered",
    /// as opposed to a server it could not reach.
    #[error("{0}")]
    Refused(String),
    /// The answer broke off.
    #[error("reading the admin API's answer")]
    Read(#[source] Box<ureq::Error>),
    /// The request could not be put into JSON.
    #[error("encoding the request to the admin API")]
    Encode(#[source] serde_json::Error),
    /// The answer was not what the request expects.
    #[error("unexpected answer from the admin API")]
    Unexpected(#[source] serde_json::Error),
}

/// An answer whatever its status, for callers that judge the status themselves (tests
/// of the API).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// The answer as `T`, or the server's refusal.
    fn decode<T: DeserializeOwned>(self) -> Result<T, AdminError> {
        if !(200..300).contains(&self.status) {
            let message = serde_json::from_str::<ErrorBody>(&self.body)
                .map(|e| e.error)
                .unwrap_or(self.body);
            return Err(AdminError::Refused(message));
        }
        serde_json::from_str(&self.body).map_err(AdminError::Unexpected)
    }
}

/// The admin API of the server that runs on a data directory.
pub struct AdminClient {
    endpoint: Endpoint,
    agent: ureq::Agent,
}

impl AdminClient {
    /// Find the server that uses `data_dir`.
    pub fn connect(data_dir: &Path) -> Result<AdminClient, AdminError> {
        let endpoint = Endpoint::discover(data_dir).map_err(|source| {
            let data_dir = data_dir.to_owned();
            match owner_if_not_mine(&data_dir, &source) {
                Some(owner) => AdminError::WrongUser { data_dir, owner },
                None => AdminError::NotRunning { data_dir, source },
            }
        })?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .build();
        Ok(AdminClient {
            endpoint,
            agent: config.into(),
        })
    }

    /// Where the server listens, and its process.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, AdminError> {
        self.send(Method::GET, path, None)?.decode()
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, AdminError> {
        self.send_json(Method::POST, path, body)
    }

    pub fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, AdminError> {
        self.send_json(Method::PUT, path, body)
    }

    fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<T, AdminError> {
        let json = serde_json::to_vec(body).map_err(AdminError::Encode)?;
        self.send(method, path, Some(json))?.decode()
    }

    pub fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, AdminError> {
        self.send(Method::DELETE, path, None)?.decode()
    }

    /// Any call, answered whatever its status.
    pub fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, AdminError> {
        self.send(method, path, body.map(|b| b.to_string().into_bytes()))
    }

    fn send(&self, method: Method, path: &str, json: Option<Vec<u8>>) -> Result<Reply, AdminError> {
        let mut request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint.url))
            .header("authorization", format!("Bearer {}", self.endpoint.token));
        if json.is_some() {
            request = request.header("content-type", "application/json");
        }
        let unreachable = |err: ureq::Error| AdminError::Unreachable {
            url: self.endpoint.url.clone(),
            err: Box::new(err),
        };
        let request = request
            .body(json.unwrap_or_default())
            .map_err(|e| unreachable(e.into()))?;
        let mut response = self.agent.run(request).map_err(unreachable)?;
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| AdminError::Read(Box::new(e)))?;
        Ok(Reply {
            status: response.status().as_u16(),
            body,
        })
    }
}

/// The name of the user that owns `data_dir`, when `err` came from not being them.
#[cfg(unix)]
fn owner_if_not_mine(data_dir: &Path, err: &std::io::Error) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if err.kind() != std::io::ErrorKind::PermissionDenied {
        return None;
    }
    let uid = std::fs::metadata(data_dir).ok()?.uid();
    Some(user_name(uid).unwrap_or_else(|| format!("the user with id {uid}")))
}

#[cfg(not(unix))]
fn owner_if_not_mine(_data_dir: &Path, _err: &std::io::Error) -> Option<String> {
    None
}

/// A user's name from `/etc/passwd` (where system users such as `herald` live).
#[cfg(unix)]
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.to_owned(),
        }
    }

    #[test]
    fn a_refusal_says_what_the_server_said() {
        let refused = reply(409, r#"{"error":"hg-1 is offline"}"#).decode::<serde_json::Value>();
        assert!(matches!(refused, Err(AdminError::Refused(m)) if m == "hg-1 is offline"));
        let bare = reply(502, "Bad Gateway").decode::<serde_json::Value>();
        assert!(matches!(bare, Err(AdminError::Refused(m)) if m == "Bad Gateway"));
    }

    #[test]
    fn an_answer_is_decoded_or_called_unexpected() {
        let delivered: crate::Delivered = reply(200, r#"{"message_id":"m1"}"#).decode().unwrap();
        assert_eq!(delivered.message_id.as_deref(), Some("m1"));
        let wrong = reply(200, "[]").decode::<crate::Delivered>();
        assert!(matches!(wrong, Err(AdminError::Unexpected(_))));
    }

    #[test]
    fn no_endpoint_means_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let err = AdminClient::connect(dir.path()).err().unwrap();
        assert!(matches!(err, AdminError::NotRunning { .. }), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_refused_look_into_someone_elses_directory_names_its_owner() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let me = user_name(std::fs::metadata(dir.path()).unwrap().uid());
        assert!(me.is_some(), "the test's own user is in /etc/passwd");
        assert_eq!(owner_if_not_mine(dir.path(), &denied), me);
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(owner_if_not_mine(dir.path(), &missing), None);
    }
}
