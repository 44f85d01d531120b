//! Pictures for a gadget's screen: decoded, fitted into its image box as RGB565 (on a
//! blocking thread), then sent as `image.start`, 4096-byte channel-2 chunks and
//! `image.end`.

use std::path::Path;

use herald_gadget_proto::{encode_frame, limits, server, Channel, FrameHeader, ServerMessage};
use herald_media::image::fit_rgb565;

use crate::edge::socket::{Outgoing, SendQueue};

/// How long a picture stays up unless the agent says otherwise.
pub(super) const IMAGE_TTL_S: u32 = 30;

#[derive(Debug, thiserror::Error)]
pub(super) enum PictureError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Image(#[from] herald_media::image::ImageError),
    #[error("the device went away")]
    Gone,
}

/// Fit the picture at `path` into `width` × `height` and send it on `stream`.
pub(super) async fn send(
    path: &Path,
    (width, height): (u32, u32),
    stream: u8,
    outbox: &SendQueue,
) -> Result<(u32, u32), PictureError> {
    let encoded = tokio::fs::read(path)
        .await
        .map_err(|source| PictureError::Read {
            path: path.display().to_string(),
            source,
        })?;
    let fitted = tokio::task::spawn_blocking(move || fit_rgb565(&encoded, width, height))
        .await
        .map_err(|_| PictureError::Gone)??;
    let start = ServerMessage::ImageStart(server::ImageStart {
        stream,
        width: fitted.width,
        height: fitted.height,
        format: "rgb565".into(),
        ttl_s: Some(IMAGE_TTL_S),
    });
    let send =
        |out: Outgoing| async move { outbox.send(out).await.map_err(|_| PictureError::Gone) };
    send(Outgoing::Text(start.encode())).await?;
    for (seq, chunk) in (0u16..).zip(fitted.pixels.chunks(limits::IMAGE_CHUNK)) {
        let header = FrameHeader {
            channel: Channel::Image,
            stream,
            seq,
        };
        send(Outgoing::Binary(encode_frame(header, chunk))).await?;
    }
    let end = ServerMessage::ImageEnd(server::ImageEnd { stream });
    send(Outgoing::Text(end.encode())).await?;
    Ok((fitted.width, fitted.height))
}
