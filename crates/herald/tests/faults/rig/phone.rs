//! A phone: the mobile client library, reconnecting quickly.

use std::time::Duration;

use herald_mobile_client::{Backoff, Client, ClientConfig, Event as PhoneEvent};
use herald_mobile_proto::{ClientFrame, DeviceInfo, ServerFrame, Text};
use tokio::time::timeout;

use super::server::Herald;
use super::PATIENCE;

pub struct Phone {
    pub client: Client,
}

impl Phone {
    pub fn spawn(herald: &Herald, token: &str, id: &str) -> Phone {
        let config = ClientConfig {
            url: herald.mobile_url.clone(),
            token: token.to_owned(),
            device: DeviceInfo {
                id: id.to_owned(),
                name: Some(format!("Phone {id}")),
                platform: Some("test".into()),
            },
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(250),
            },
        };
        Phone {
            client: Client::spawn(config),
        }
    }

    pub async fn event(&mut self) -> PhoneEvent {
        match timeout(PATIENCE, self.client.next_event()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("the phone client stopped"),
            Err(_) => panic!("no event from the phone in time"),
        }
    }

    pub async fn connected(&mut self) {
        loop {
            match self.event().await {
                PhoneEvent::Connected { .. } => return,
                PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                    panic!("the phone was refused: {reason}")
                }
                _ => {}
            }
        }
    }

    pub async fn send_text(&self, id: &str, text: &str) {
        let frame = ClientFrame::Text(Text {
            id: id.to_owned(),
            text: text.to_owned(),
            reply_to: None,
        });
        self.client.send(frame).await.unwrap();
    }

    /// The text of the next final message.
    pub async fn final_text(&mut self) -> String {
        loop {
            if let PhoneEvent::Frame(ServerFrame::Message(m)) = self.event().await {
                if m.final_ {
                    return m.text;
                }
            }
        }
    }
}

/// The final text of `event`, if it is the last frame of a reply.
pub fn final_text(event: &PhoneEvent) -> Option<&str> {
    match event {
        PhoneEvent::Frame(ServerFrame::Message(m)) if m.final_ => Some(&m.text),
        _ => None,
    }
}

pub fn typing_on(event: &PhoneEvent) -> bool {
    matches!(
        event,
        PhoneEvent::Frame(ServerFrame::Typing { stop: false })
    )
}

/// A message of `words` words, unique to `tag`.
pub fn words(tag: &str, words: u64) -> String {
    let mut text = tag.to_owned();
    for n in 1..words {
        text.push_str(&format!(" w{n}"));
    }
    text
}
