//! What the device shows: the connection phase, the conversation mode, the screen that
//! follows from them and the overlays, and the render model a display driver draws.
//!
//! The core decides *what* is on screen; fonts, colours and layout are the host's. The
//! screen names are stable strings because the simulator's scripts and status line use
//! them.

use alloc::string::String;
use alloc::vec::Vec;

/// Where the connection to the server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Just started; nothing asked of the network yet.
    Boot,
    /// Not connected; waiting for the next attempt.
    Offline,
    /// Waiting for the WebSocket to open.
    Connecting,
    /// Connected; `hello` sent, waiting for `welcome`.
    Handshake,
    /// `welcome` received.
    Online,
}

impl Phase {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Boot => "boot",
            Self::Offline => "offline",
            Self::Connecting => "connecting",
            Self::Handshake => "handshake",
            Self::Online => "online",
        }
    }
}

/// Where the conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Nothing going on.
    Idle,
    /// Recording an utterance.
    Listening,
    /// Waiting for the agent's reply.
    Thinking,
    /// Showing a reply that is still coming, or playing its audio.
    Responding,
}

impl Mode {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Listening => "listening",
            Self::Thinking => "thinking",
            Self::Responding => "responding",
        }
    }
}

/// The screen shown, from phase, mode and overlays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Screen {
    /// Starting up.
    Boot,
    /// No connection.
    Offline,
    /// Connecting or in the handshake.
    Connecting,
    /// The server refused the device (`auth_failed`, `bad_token`, `protocol`).
    Setup,
    /// Online but not approved: shows the pairing code.
    Pairing,
    /// Online and idle.
    Ready,
    /// Recording.
    Listening,
    /// Waiting for the reply.
    Thinking,
    /// Showing or playing the reply.
    Responding,
    /// A display card.
    Card,
    /// An image.
    Image,
    /// A yes/no question.
    Prompt,
    /// Installing a firmware update.
    Updating,
}

impl Screen {
    /// Every screen.
    pub const ALL: [Screen; 13] = [
        Self::Boot,
        Self::Offline,
        Self::Connecting,
        Self::Setup,
        Self::Pairing,
        Self::Ready,
        Self::Listening,
        Self::Thinking,
        Self::Responding,
        Self::Card,
        Self::Image,
        Self::Prompt,
        Self::Updating,
    ];

    /// The name scripts and status lines use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Boot => "boot",
            Self::Offline => "offline",
            Self::Connecting => "connecting",
            Self::Setup => "setup",
            Self::Pairing => "pairing",
            Self::Ready => "ready",
            Self::Listening => "listening",
            Self::Thinking => "thinking",
            Self::Responding => "responding",
            Self::Card => "card",
            Self::Image => "image",
            Self::Prompt => "prompt",
            Self::Updating => "updating",
        }
    }

    /// The screen with this name.
    pub fn from_name(name: &str) -> Option<Screen> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// An RGB565 image as received: row-major, little-endian pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

impl Image {
    /// An image of `width` × `height` pixels from its RGB565 LE bytes; missing bytes read
    /// as black and extra bytes are dropped.
    pub fn new(width: u32, height: u32, mut data: Vec<u8>) -> Image {
        let len = usize::try_from(u64::from(width) * u64::from(height) * 2).unwrap_or(0);
        data.resize(len, 0);
        Image {
            width,
            height,
            data,
        }
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The raw RGB565 little-endian bytes, row-major.
    pub fn rgb565_le(&self) -> &[u8] {
        &self.data
    }

    /// The pixel at `x`, `y`; `None` outside the image.
    pub fn pixel(&self, x: u32, y: u32) -> Option<u16> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let at = usize::try_from((u64::from(y) * u64::from(self.width) + u64::from(x)) * 2).ok()?;
        Some(u16::from_le_bytes([
            *self.data.get(at)?,
            *self.data.get(at + 1)?,
        ]))
    }
}

/// The render model: everything a display driver needs to draw one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View<'a> {
    /// The screen shown.
    pub screen: Screen,
    /// One line of state: what is going on, the agent's working phrase, a title.
    pub status: String,
    /// Title of the card or prompt shown.
    pub title: Option<&'a str>,
    /// The text area's current page: at most `text_rows` lines of at most `text_cols`
    /// characters.
    pub lines: Vec<String>,
    /// Index of the page shown, from 0.
    pub page: usize,
    /// Pages in all; UP and DOWN move between them.
    pub pages: usize,
    /// A transient one-line notice.
    pub notice: Option<&'a str>,
    /// The image, on the image screen.
    pub image: Option<&'a Image>,
    /// On the prompt screen: from when a press answers (the question's guard ends), so a
    /// host with on-screen answers can wake them then.
    pub answers_from: Option<crate::Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn screen_names_round_trip() {
        for s in Screen::ALL {
            assert_eq!(Screen::from_name(s.name()), Some(s));
        }
        assert_eq!(Screen::from_name("Ready"), None);
    }

    #[test]
    fn image_pixels_are_little_endian_and_padded() {
        let img = Image::new(2, 2, vec![0x00, 0xf8, 0x1f, 0x00, 0xe0]);
        assert_eq!(img.pixel(0, 0), Some(0xF800));
        assert_eq!(img.pixel(1, 0), Some(0x001F));
        assert_eq!(img.pixel(0, 1), Some(0x00E0));
        assert_eq!(img.pixel(1, 1), Some(0));
        assert_eq!(img.pixel(2, 0), None);
        assert_eq!(img.rgb565_le().len(), 8);
    }
}
