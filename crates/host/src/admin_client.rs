//! Talks to a running server's admin API (see `herald_server::admin`): the server that
//! runs on a data directory writes its endpoint and token there, and this client reads
//! them.

use std::path::{Path, PathBuf};

use herald_server::admin::Endpoint;
use serde::de::DeserializeOwned;
use serde::Serialize;

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
    /// The answer was not what the request expects.
    #[error("unexpected answer from the admin API")]
    Unexpected(#[source] serde_json::Error),
}

pub struct AdminClient {
    endpoint: Endpoint,
    agent: ureq::Agent,
}

impl AdminClient {
    /// Find the server that uses `data_dir`.
    pub fn connect(data_dir: &Path) -> Result<AdminClient, AdminError> {
        let endpoint = Endpoint::discover(data_dir).map_err(|source| AdminError::NotRunning {
            data_dir: data_dir.to_owned(),
            source,
        })?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(10)))
            .build();
        Ok(AdminClient {
            endpoint,
            agent: config.into(),
        })
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, AdminError> {
        let response = self
            .agent
            .get(&self.url(path))
            .header("Authorization", &self.bearer())
            .call()
            .map_err(|e| self.unreachable(e))?;
        decode(response)
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, AdminError> {
        let response = self
            .agent
            .post(&self.url(path))
            .header("Authorization", &self.bearer())
            .send_json(body)
            .map_err(|e| self.unreachable(e))?;
        decode(response)
    }

    pub fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, AdminError> {
        let response = self
            .agent
            .delete(&self.url(path))
            .header("Authorization", &self.bearer())
            .call()
            .map_err(|e| self.unreachable(e))?;
        decode(response)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint.url)
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.endpoint.token)
    }

    fn unreachable(&self, err: ureq::Error) -> AdminError {
        AdminError::Unreachable {
            url: self.endpoint.url.clone(),
            err: Box::new(err),
        }
    }
}

fn decode<T: DeserializeOwned>(
    mut response: ureq::http::Response<ureq::Body>,
) -> Result<T, AdminError> {
    let status = response.status();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| AdminError::Read(Box::new(e)))?;
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or(body);
        return Err(AdminError::Refused(message));
    }
    serde_json::from_str(&body).map_err(AdminError::Unexpected)
}
