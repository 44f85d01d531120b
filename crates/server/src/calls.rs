//! Conversation-port requests on their way to a device's session.
//!
//! The router wraps each [`Request`] with the channel its answer goes back on and sends
//! it to the session of the chat's device, whatever the platform; each session answers
//! what its device can honour and refuses the rest with a clear error.

use herald_port::{Request, RequestError, Response};
use tokio::sync::oneshot;

/// Where a session sends a request's answer.
pub(crate) type Reply = oneshot::Sender<Result<Response, RequestError>>;

pub(crate) struct Call {
    pub request: Request,
    pub reply: Reply,
}
