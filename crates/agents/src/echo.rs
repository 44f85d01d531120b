//! A zero-delay echo backend for load tests: every text gets one immediate reply,
//! inside a turn, with nothing else (no status, no streaming, no timers), so what a
//! benchmark measures is Herald, not the agent.

use std::sync::Arc;

use async_trait::async_trait;
use herald_port::{Agent, Inbound, InboundBody, Outbound, Outcome, SendOptions, TurnId};

pub struct EchoAgent {
    out: Arc<dyn Outbound>,
}

impl EchoAgent {
    pub fn new(out: Arc<dyn Outbound>) -> Self {
        EchoAgent { out }
    }
}

#[async_trait]
impl Agent for EchoAgent {
    async fn handle(&self, inbound: Inbound) {
        let text = match inbound.body {
            InboundBody::Text { text, .. } => text,
            InboundBody::Voice { duration_ms, .. } => format!("voice {duration_ms} ms"),
            InboundBody::Media { path, .. } => format!("file {}", path.display()),
            InboundBody::Command(_)
            | InboundBody::PromptAnswer(_)
            | InboundBody::SpeechStopped { .. }
            | InboundBody::TurnTimedOut { .. } => return,
        };
        let chat = inbound.source.chat;
        let turn = TurnId::next();
        self.out.turn_started(&chat, turn.clone()).await;
        let outcome = match self
            .out
            .send_text(&chat, &text, SendOptions::default())
            .await
        {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        };
        self.out.turn_ended(&chat, turn, outcome).await;
    }
}
