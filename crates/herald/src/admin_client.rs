//! Talks to a running server's admin API (see `herald_server::admin`).

use std::path::Path;

use anyhow::{anyhow, Context};
use herald_server::admin::Endpoint;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The server answered, and said no: what `herald send` reports as "not delivered",
/// as opposed to a server it could not reach.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

pub struct AdminClient {
    endpoint: Endpoint,
    agent: ureq::Agent,
}

impl AdminClient {
    /// Find the server that uses `data_dir`.
    pub fn connect(data_dir: &Path) -> anyhow::Result<AdminClient> {
        let endpoint = Endpoint::discover(data_dir).with_context(|| {
            format!(
                "herald is not running with data directory {} (start it with `herald serve`)",
                data_dir.display()
            )
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

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
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
    ) -> anyhow::Result<T> {
        let response = self
            .agent
            .post(&self.url(path))
            .header("Authorization", &self.bearer())
            .send_json(body)
            .map_err(|e| self.unreachable(e))?;
        decode(response)
    }

    pub fn delete<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
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

    fn unreachable(&self, err: ureq::Error) -> anyhow::Error {
        anyhow!(
            "cannot reach herald's admin API at {} (is `herald serve` running?): {err}",
            self.endpoint.url
        )
    }
}

fn decode<T: DeserializeOwned>(
    mut response: ureq::http::Response<ureq::Body>,
) -> anyhow::Result<T> {
    let status = response.status();
    let body = response
        .body_mut()
        .read_to_string()
        .context("reading the admin API's answer")?;
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or(body);
        return Err(Refused(message).into());
    }
    serde_json::from_str(&body).context("unexpected answer from the admin API")
}
