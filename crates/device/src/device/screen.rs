//! Overlays (card, image, prompt), notices and the render model.
//!
//! Which screen shows follows from state alone, in this order: a firmware update; then,
//! off line, boot / setup / offline / connecting; on line, a prompt (it waits for an
//! answer), recording, the newer of card and image, the pairing code while unpaired, and
//! last the conversation (thinking, responding, ready). Overlays have deadlines from their
//! `ttl_s` (card 15 s, image 30 s, notice 8 s when absent; 0 keeps them until dismissed),
//! and CANCEL dismisses the card or image on top.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use herald_gadget_proto::limits::{
    DEFAULT_CARD_TTL_SECS, DEFAULT_IMAGE_TTL_SECS, DEFAULT_NOTICE_TTL_SECS, PROMPT_GUARD_MS,
};
use herald_gadget_proto::{Answer, Display, ErrorCode, ImageStart, Prompt, PromptReply};

use super::Device;
use crate::config::{DeviceConfig, RGB565};
use crate::host::Host;
use crate::text::{wrap, Pager};
use crate::time::{due, earliest, millis, secs, Instant};
use crate::view::{Image, Mode, Phase, Screen, View};

/// Text geometry of a device without a display profile, for hosts that still show text.
const FALLBACK_TEXT: (usize, usize) = (32, 4);

/// The last row of a question: what the two buttons answer. Fits 20 columns.
const PROMPT_HINT: &str = "TALK yes, CANCEL no";

/// `(text_cols, text_rows)` of the board.
pub(super) fn text_geometry(config: &DeviceConfig) -> (usize, usize) {
    config.display.as_ref().map_or(FALLBACK_TEXT, |d| {
        (usize::from(d.text_cols), usize::from(d.text_rows))
    })
}

/// When an overlay with this `ttl_s` goes away: the default when absent, never for 0.
fn ttl_deadline(now: Instant, ttl_s: Option<u32>, default_s: u32) -> Option<Instant> {
    match ttl_s.unwrap_or(default_s) {
        0 => None,
        s => Some(now + secs(u64::from(s))),
    }
}

#[derive(Debug)]
pub(super) struct PromptShown {
    id: String,
    title: String,
    text: Pager,
    shown_at: Instant,
    until: Option<Instant>,
}

impl PromptShown {
    /// Presses that begin before this are ignored.
    pub(super) fn guard_until(&self) -> Instant {
        self.shown_at + millis(PROMPT_GUARD_MS)
    }
}

#[derive(Debug)]
pub(super) struct CardShown {
    title: String,
    body: Pager,
    until: Option<Instant>,
}

#[derive(Debug)]
pub(super) struct ImageShown {
    image: Image,
    until: Option<Instant>,
}

/// An image whose rows are arriving on channel 2.
#[derive(Debug)]
pub(super) struct IncomingImage {
    stream: u8,
    width: u32,
    height: u32,
    ttl_s: Option<u32>,
    data: Vec<u8>,
    /// Bytes the image has in all; anything past it is dropped.
    len: usize,
}

#[derive(Debug)]
pub(super) struct NoticeShown {
    text: String,
    until: Option<Instant>,
}

/// The overlay on top, when there is a card or an image.
enum Top {
    Card,
    Image,
}

impl<H: Host> Device<H> {
    /// The screen shown.
    pub fn screen(&self) -> Screen {
        if self.ota.is_active() {
            return Screen::Updating;
        }
        match self.phase {
            Phase::Boot => Screen::Boot,
            _ if self.phase != Phase::Online && self.setup_needed.is_some() => Screen::Setup,
            Phase::Offline => Screen::Offline,
            Phase::Connecting | Phase::Handshake => Screen::Connecting,
            Phase::Online => {
                if self.prompt.is_some() {
                    return Screen::Prompt;
                }
                if self.recording.is_some() {
                    return Screen::Listening;
                }
                match self.top() {
                    Some(Top::Card) => return Screen::Card,
                    Some(Top::Image) => return Screen::Image,
                    None => {}
                }
                if !self.paired {
                    return Screen::Pairing;
                }
                match self.mode() {
                    Mode::Thinking => Screen::Thinking,
                    Mode::Responding => Screen::Responding,
                    Mode::Idle | Mode::Listening => Screen::Ready,
                }
            }
        }
    }

    /// Where the conversation stands.
    pub fn mode(&self) -> Mode {
        if self.recording.is_some() {
            Mode::Listening
        } else if self.player.is_active() || self.chat.replying {
            Mode::Responding
        } else if self.chat.awaiting {
            Mode::Thinking
        } else {
            Mode::Idle
        }
    }

    /// The render model of the screen shown.
    pub fn view(&self) -> View<'_> {
        let screen = self.screen();
        let (cols, rows) = text_geometry(&self.config);
        let fixed = |text: &str| {
            let mut lines = wrap(text, cols);
            lines.truncate(rows);
            lines
        };
        let mut view = View {
            screen,
            status: String::new(),
            title: None,
            lines: Vec::new(),
            page: 0,
            pages: 1,
            notice: self.notice.as_ref().map(|n| n.text.as_str()),
            image: None,
            answers_from: None,
        };
        let mut pager = None;
        match screen {
            Screen::Boot => {
                view.status = "Starting".to_string();
                view.lines = fixed(&format!(
                    "{}\n{}",
                    self.config.name,
                    self.identity.device_id()
                ));
            }
            Screen::Offline => {
                view.status = "Offline".to_string();
                view.lines = fixed("No connection. Trying again soon.");
            }
            Screen::Connecting => {
                view.status = "Connecting".to_string();
                view.lines = fixed("Connecting to the server...");
            }
            Screen::Setup => {
                view.status = "Setup needed".to_string();
                view.lines = fixed(&self.setup_text());
            }
            Screen::Pairing => {
                view.status = "Pairing".to_string();
                view.lines = fixed(&match &self.pairing {
                    Some(p) => format!(
                        "Pairing code: {}\n\nApprove it on the host:\n{}",
                        p.code, p.command
                    ),
                    None => "Waiting for approval".to_string(),
                });
            }
            Screen::Updating => {
                let (version, percent) = self
                    .ota
                    .progress()
                    .map_or(("", 0), |p| (p.version, p.written * 100 / p.size.max(1)));
                view.status = format!("Updating {percent}%");
                view.lines = fixed(&format!("Installing firmware {version}"));
            }
            Screen::Prompt => {
                view.status = "Question".to_string();
                if let Some(p) = &self.prompt {
                    view.title = Some(&p.title);
                    view.answers_from = Some(p.guard_until());
                    pager = Some(&p.text);
                }
            }
            Screen::Card => {
                view.status = "Card".to_string();
                if let Some(c) = &self.card {
                    view.title = Some(&c.title);
                    pager = Some(&c.body);
                }
            }
            Screen::Image => {
                view.status = "Image".to_string();
                view.image = self.image.as_ref().map(|i| &i.image);
            }
            Screen::Ready | Screen::Listening | Screen::Thinking | Screen::Responding => {
                let label = match screen {
                    Screen::Ready => "Ready",
                    Screen::Listening => "Listening",
                    Screen::Thinking => "Thinking",
                    _ => "Responding",
                };
                let working = matches!(screen, Screen::Thinking | Screen::Responding);
                view.status = if working && !self.chat.status.is_empty() {
                    self.chat.status.clone()
                } else {
                    label.to_string()
                };
                pager = Some(&self.chat.text);
            }
        }
        if let Some(pager) = pager {
            view.lines = pager.current().to_vec();
            view.page = pager.page();
            view.pages = pager.pages();
        }
        if screen == Screen::Prompt {
            // The last row, which the question's pages leave free.
            view.lines
                .extend(wrap(PROMPT_HINT, cols).into_iter().take(1));
        }
        if let Some(hold) = &self.cancel_hold {
            view.status = hold.status();
        }
        view
    }

    fn setup_text(&self) -> String {
        let id = self.identity.device_id();
        match self.setup_needed {
            Some(ErrorCode::BadToken) => {
                "The server refused the access token. Set the right token.".to_string()
            }
            Some(ErrorCode::Protocol) => {
                "The server does not speak this protocol. Update the firmware.".to_string()
            }
            _ => format!("The server refused this device. Ask the owner to forget {id}."),
        }
    }

    fn top(&self) -> Option<Top> {
        match (&self.card, &self.image) {
            (Some(_), Some(_)) if self.image_on_top => Some(Top::Image),
            (Some(_), _) => Some(Top::Card),
            (None, Some(_)) => Some(Top::Image),
            (None, None) => None,
        }
    }

    pub(super) fn screen_deadline(&self) -> Option<Instant> {
        [
            self.prompt.as_ref().and_then(|p| p.until),
            self.card.as_ref().and_then(|c| c.until),
            self.image.as_ref().and_then(|i| i.until),
            self.notice.as_ref().and_then(|n| n.until),
        ]
        .into_iter()
        .fold(None, earliest)
    }

    pub(super) fn screen_timers(&mut self, now: Instant) {
        // An expired question goes away unanswered.
        if due(self.prompt.as_ref().and_then(|p| p.until), now) {
            self.prompt = None;
            self.touch();
        }
        if due(self.card.as_ref().and_then(|c| c.until), now) {
            self.card = None;
            self.touch();
        }
        if due(self.image.as_ref().and_then(|i| i.until), now) {
            self.image = None;
            self.touch();
        }
        if due(self.notice.as_ref().and_then(|n| n.until), now) {
            self.notice = None;
            self.touch();
        }
    }

    /// UP and DOWN page the text of the screen shown.
    pub(super) fn turn_page(&mut self, down: bool) {
        let pager = match self.screen() {
            Screen::Prompt => self.prompt.as_mut().map(|p| &mut p.text),
            Screen::Card => self.card.as_mut().map(|c| &mut c.body),
            Screen::Ready | Screen::Listening | Screen::Thinking | Screen::Responding => {
                Some(&mut self.chat.text)
            }
            _ => None,
        };
        let moved = pager.is_some_and(|p| if down { p.page_down() } else { p.page_up() });
        if moved {
            self.touch();
        }
    }

    pub(super) fn answer_prompt(&mut self, answer: Answer) {
        if let Some(prompt) = self.prompt.take() {
            self.send(PromptReply {
                id: prompt.id,
                answer,
            });
            self.touch();
        }
    }

    /// Takes the card or image on top away; false when there is none.
    pub(super) fn dismiss_overlay(&mut self) -> bool {
        match self.top() {
            Some(Top::Card) => self.card = None,
            Some(Top::Image) => self.image = None,
            None => return false,
        }
        self.touch();
        true
    }

    /// `text` laid out for the text area, from its first page.
    fn paged(&self, text: &str) -> Pager {
        self.paged_in(text, 0)
    }

    /// [`Self::paged`] with `reserved` rows of the text area left free below the text.
    fn paged_in(&self, text: &str, reserved: usize) -> Pager {
        let (cols, rows) = text_geometry(&self.config);
        let mut pager = Pager::new(cols, rows.saturating_sub(reserved).max(1));
        pager.show(text);
        pager
    }

    pub(super) fn show_notice(&mut self, text: &str, ttl_s: Option<u32>, now: Instant) {
        self.notice = Some(NoticeShown {
            text: text.to_string(),
            until: ttl_deadline(now, ttl_s, DEFAULT_NOTICE_TTL_SECS),
        });
        self.touch();
    }

    /// A new question replaces the one shown: the server asks one at a time.
    pub(super) fn show_prompt(&mut self, prompt: Prompt, now: Instant) {
        self.prompt = Some(PromptShown {
            // The hint takes the last row.
            text: self.paged_in(&prompt.text, 1),
            id: prompt.id,
            title: prompt.title,
            shown_at: now,
            // A question without a ttl (or with 0) waits for its answer.
            until: prompt
                .ttl_s
                .filter(|s| *s > 0)
                .map(|s| now + secs(u64::from(s))),
        });
        self.touch();
    }

    pub(super) fn close_prompt(&mut self, id: &str) {
        if self.prompt.as_ref().is_some_and(|p| p.id == id) {
            self.prompt = None;
            self.touch();
        }
    }

    pub(super) fn show_card(&mut self, card: Display, now: Instant) {
        self.card = Some(CardShown {
            body: self.paged(&card.body),
            title: card.title,
            until: ttl_deadline(now, card.ttl_s, DEFAULT_CARD_TTL_SECS),
        });
        self.image_on_top = false;
        self.touch();
    }

    /// Accepts an image that fits the image box; anything else is refused and its rows
    /// ignored, so memory never exceeds one box of pixels.
    pub(super) fn image_start(&mut self, start: ImageStart) {
        let fits = self.config.image_box().is_some_and(|b| {
            start.format == RGB565
                && (1..=b.width).contains(&start.width)
                && (1..=b.height).contains(&start.height)
        });
        self.incoming_image = None;
        if !fits {
            self.stats.refused_images += 1;
            return;
        }
        let len =
            usize::try_from(u64::from(start.width) * u64::from(start.height) * 2).unwrap_or(0);
        self.incoming_image = Some(IncomingImage {
            stream: start.stream,
            width: start.width,
            height: start.height,
            ttl_s: start.ttl_s,
            data: Vec::with_capacity(len),
            len,
        });
    }

    pub(super) fn image_data(&mut self, stream: u8, payload: &[u8]) {
        if let Some(image) = self.incoming_image.as_mut().filter(|i| i.stream == stream) {
            let room = image.len - image.data.len();
            image
                .data
                .extend_from_slice(&payload[..payload.len().min(room)]);
        }
    }

    pub(super) fn image_end(&mut self, stream: u8, now: Instant) {
        if let Some(incoming) = self.incoming_image.take_if(|i| i.stream == stream) {
            self.image = Some(ImageShown {
                image: Image::new(incoming.width, incoming.height, incoming.data),
                until: ttl_deadline(now, incoming.ttl_s, DEFAULT_IMAGE_TTL_SECS),
            });
            self.image_on_top = true;
            self.touch();
        }
    }
}
