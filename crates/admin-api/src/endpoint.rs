//! How a tool finds the server that runs on a data directory: the server writes where
//! it listens to [`ENDPOINT_FILE`] and keeps its token in [`TOKEN_FILE`], both readable
//! by the directory's owner only, so only that owner can call the API.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The bearer token every admin request carries, in the data directory.
pub const TOKEN_FILE: &str = "admin.token";
/// Where the API listens and which process serves it, in the data directory.
pub const ENDPOINT_FILE: &str = "admin.json";

/// How a tool finds and authenticates to a running server.
#[derive(Clone, Serialize, Deserialize)]
pub struct Endpoint {
    pub url: String,
    pub pid: u32,
    /// Kept in [`TOKEN_FILE`], never in [`ENDPOINT_FILE`].
    #[serde(skip)]
    pub token: String,
}

/// Everything but the token, which a logged endpoint must not give away.
impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("pid", &self.pid)
            .field("token", &"<secret>")
            .finish()
    }
}

impl Endpoint {
    /// Read the endpoint a running server left in `data_dir`.
    pub fn discover(data_dir: &Path) -> std::io::Result<Endpoint> {
        let text = std::fs::read_to_string(data_dir.join(ENDPOINT_FILE))?;
        let mut endpoint: Endpoint = serde_json::from_str(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        endpoint.token = std::fs::read_to_string(data_dir.join(TOKEN_FILE))?
            .trim()
            .to_owned();
        Ok(endpoint)
    }
}
