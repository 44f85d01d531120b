//! The console's side of the admin API against a real server on loopback, and what its
//! tests share: a started server, requests as a browser (or the CLI) sends them, and the
//! console's login. What each part covers:
//! - `login`: the login and its cookie, the CSRF rules, the lock after wrong tokens, a
//!   page that rebound its name to this machine, and the token kept out of the logs;
//! - `pages`: the pages and their headers, the server page's URLs, QR codes and figures,
//!   and uploads or requests for no device that say what is wrong;
//! - `live`: the live stream, and the Hermes mode where pairing is not Herald's.
//!
//! (The whole console in a browser is `web/tests/console.test.mjs`.)

mod live;
mod login;
mod pages;

use std::sync::Arc;

use herald_agents::DemoAgent;
use herald_port::{AgentFactory, Backend};
use serde_json::{json, Value};

use crate::Server;
use herald_admin_api::Endpoint;
use herald_config::{Config, Secret};

struct Running {
    server: Server,
    dir: tempfile::TempDir,
    endpoint: Endpoint,
}

fn config() -> Config {
    let mut config = Config::default();
    config.gadget.host = [127, 0, 0, 1].into();
    config.gadget.port = 0;
    config.mobile.host = [127, 0, 0, 1].into();
    config.mobile.port = 0;
    config.mobile.token = Some(Secret("console-test-app-token-0123456789abcdef".into()));
    config.admin.port = 0;
    config
}

fn demo() -> AgentFactory {
    Box::new(|out| Backend::agent(Arc::new(DemoAgent::new(out))))
}

async fn start(agent: AgentFactory) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(config(), dir.path(), agent).await.unwrap();
    let endpoint = Endpoint::discover(dir.path()).unwrap();
    Running {
        server,
        dir,
        endpoint,
    }
}

/// One request, as a browser (or the CLI) would send it.
#[derive(Clone, Default)]
struct Req {
    method: &'static str,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    text: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }
}

fn req(method: &'static str, path: &str) -> Req {
    Req {
        method,
        path: path.to_owned(),
        ..Req::default()
    }
}

impl Req {
    fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn json(self, body: Value) -> Req {
        let mut r = self.header("content-type", "application/json");
        r.body = Some(body.to_string().into_bytes());
        r
    }

    /// As the console page sends a change: its session cookie, its CSRF token and the
    /// console's own origin.
    fn sent_by_console(self, cookie: &str, csrf: &str, origin: &str) -> Req {
        self.header("cookie", cookie)
            .header("x-herald-csrf", csrf)
            .header("origin", origin)
    }

    fn bytes(self, body: &[u8]) -> Req {
        let mut r = self.header("content-type", "application/octet-stream");
        r.body = Some(body.to_vec());
        r
    }
}

impl Running {
    async fn send(&self, r: Req) -> Resp {
        let url = format!("{}{}", self.endpoint.url, r.path);
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .build()
                .into();
            let mut builder = ureq::http::Request::builder().method(r.method).uri(&url);
            for (name, value) in &r.headers {
                builder = builder.header(name, value);
            }
            let request = builder.body(r.body.unwrap_or_default()).unwrap();
            let mut response = agent.run(request).unwrap();
            let headers = response
                .headers()
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            Resp {
                status: response.status().as_u16(),
                headers,
                text,
            }
        })
        .await
        .unwrap()
    }

    fn origin(&self) -> String {
        self.endpoint.url.clone()
    }

    /// Log in as the console does: the cookie to send back and the CSRF token.
    async fn login(&self) -> (String, String) {
        let r = req("POST", "/v1/login")
            .header("origin", &self.origin())
            .json(json!({ "token": self.endpoint.token }));
        let answer = self.send(r).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        let set = answer.header("set-cookie").unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let csrf = answer.json()["csrf"].as_str().unwrap().to_owned();
        (cookie, csrf)
    }
}
