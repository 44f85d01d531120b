//! A phone app on the wire: mobile protocol frames sent as JSON and received decoded,
//! one at a time, for tests that look at every frame, and send ones no app would.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::server::close_frame;
use crate::wait::promptly;

/// A phone app speaking the mobile protocol, one frame at a time.
pub struct Phone {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Phone {
    pub async fn open(url: &str) -> Phone {
        let (ws, _) = promptly(tokio_tungstenite::connect_async(url))
            .await
            .unwrap();
        Phone { ws }
    }

    /// Connect and say hello; panics unless `ready` arrives.
    pub async fn connect(
        url: &str,
        token: &str,
        device: &str,
    ) -> (Phone, herald_mobile_proto::ServerFrame) {
        let mut phone = Phone::open(url).await;
        phone.hello(token, device).await;
        let ready = phone.recv().await;
        assert!(
            matches!(ready, herald_mobile_proto::ServerFrame::Ready { .. }),
            "{ready:?}"
        );
        (phone, ready)
    }

    pub async fn hello(&mut self, token: &str, device: &str) {
        let hello = serde_json::json!({"t": "hello", "token": token,
            "device": {"id": device, "name": "Test Phone", "platform": "test"}});
        self.send(hello).await;
    }

    pub async fn send(&mut self, frame: Value) {
        self.ws
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    pub async fn text(&mut self, id: &str, text: &str) {
        self.send(serde_json::json!({"t": "text", "id": id, "text": text}))
            .await;
    }

    pub async fn recv(&mut self) -> herald_mobile_proto::ServerFrame {
        loop {
            match promptly(self.ws.next()).await {
                Some(Ok(Message::Text(text))) => {
                    return herald_mobile_proto::ServerFrame::decode(&text).unwrap()
                }
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}"),
            }
        }
    }

    pub async fn until<T>(
        &mut self,
        mut pick: impl FnMut(herald_mobile_proto::ServerFrame) -> Option<T>,
    ) -> T {
        for _ in 0..500 {
            if let Some(found) = pick(self.recv().await) {
                return found;
            }
        }
        panic!("never got the expected frame");
    }

    /// The next question card.
    pub async fn card(&mut self) -> herald_mobile_proto::PromptCard {
        self.until(|f| match f {
            herald_mobile_proto::ServerFrame::Prompt(card) => Some(card),
            _ => None,
        })
        .await
    }

    /// The next `prompt_done`: its card, the option that counted, and whether it lapsed.
    pub async fn prompt_done(&mut self) -> (String, Option<String>, bool) {
        self.until(|f| match f {
            herald_mobile_proto::ServerFrame::PromptDone {
                prompt_id,
                option_id,
                expired,
            } => Some((prompt_id, option_id, expired)),
            _ => None,
        })
        .await
    }

    /// The next complete reply (chunks joined, streaming edits applied).
    pub async fn reply(&mut self) -> String {
        let mut text = String::new();
        loop {
            if let herald_mobile_proto::ServerFrame::Message(m) = self.recv().await {
                if m.edit {
                    text = m.text;
                } else {
                    text.push_str(&m.text);
                }
                if m.final_ {
                    return text;
                }
            }
        }
    }

    /// The next complete reply, or the error that came before it.
    pub async fn reply_or_error(
        &mut self,
    ) -> Result<String, (herald_mobile_proto::ErrorCode, String)> {
        let mut text = String::new();
        loop {
            match self.recv().await {
                herald_mobile_proto::ServerFrame::Error { code, message } => {
                    return Err((code, message))
                }
                herald_mobile_proto::ServerFrame::Message(m) => {
                    if m.edit {
                        text = m.text;
                    } else {
                        text.push_str(&m.text);
                    }
                    if m.final_ {
                        return Ok(text);
                    }
                }
                _ => {}
            }
        }
    }

    pub async fn closed(&mut self, within: Duration) -> Option<CloseFrame> {
        close_frame(&mut self.ws, within).await
    }
}
