//! The gadget in a browser tab: the same [`herald_device::Device`] the firmware, the
//! simulator and the Linux gadget run, built for WebAssembly so the page is only a host
//! (a WebSocket, a canvas, Web Audio, the buttons) and never a second copy of the device.
//!
//! [`Tab`] is the device with what a page can pass across a WebAssembly boundary: text,
//! bytes and numbers. Events go in as calls, each action comes out as a small JSON object
//! (with its bulk, audio or a frame, in a byte buffer beside it), and the screen as the
//! JSON of [`herald_device::View`]. `abi` exports it to the page; everything here is safe
//! Rust that the native tests drive.

#[cfg(target_arch = "wasm32")]
mod abi;

use herald_device::{Action, Boot, Button, Device, DeviceConfig, Event, FlashError, Host, Instant};
use herald_gadget_proto::auth::{b64, decode_key, KeyError};
use herald_gadget_proto::device::Auth;
use herald_gadget_proto::{ActionSpec, DeviceMessage};
use serde_json::{json, Value};

/// What the tab pretends to be: the reference board's screen, mic and speaker, text in
/// any script (the browser has the fonts), no firmware updates.
pub fn board(name: &str, token: Option<String>) -> DeviceConfig {
    let mut config = DeviceConfig::reference(name);
    config.board = "browser-tab".to_string();
    config.token = token;
    config.ota_max_size = None;
    if let Some(display) = &mut config.display {
        display.charset = "utf8".to_string();
    }
    config
}

/// Why the page's settings cannot boot a device.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("the settings are not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the stored {0}")]
    BadKey(#[from] KeyError),
}

/// The host services the core asks for on the spot: the page's random bytes; a tab
/// installs no firmware.
pub struct TabHost {
    random: fn(&mut [u8]),
}

impl Host for TabHost {
    fn fill_random(&mut self, buf: &mut [u8]) {
        (self.random)(buf);
    }
    fn ota_begin(&mut self, _: u64) -> Result<(), FlashError> {
        Err(FlashError::Io)
    }
    fn ota_write(&mut self, _: &[u8]) -> Result<(), FlashError> {
        Err(FlashError::Io)
    }
    fn ota_finish(&mut self) -> Result<(), FlashError> {
        Err(FlashError::Io)
    }
    fn ota_abort(&mut self) {}
}

/// The device of one page.
pub struct Tab {
    device: Device<TabHost>,
}

impl Tab {
    /// Boot at `now` from the page's settings, `{"name", "token"?, "key"?}` (the key in
    /// base64, as [`Tab::next_action`] asked it kept); `random` fills buffers with
    /// secure random bytes.
    pub fn boot(settings: &str, random: fn(&mut [u8]), now: Instant) -> Result<Tab, BootError> {
        let settings: Value = serde_json::from_str(settings)?;
        let text = |field: &str| settings.get(field).and_then(Value::as_str);
        let key = text("key").map(decode_key).transpose()?;
        let config = board(
            text("name").unwrap_or("Tab Gadget"),
            text("token").map(str::to_string),
        );
        let boot = Boot {
            key,
            probation: false,
        };
        let device = Device::new(config, boot, TabHost { random }, now);
        Ok(Tab { device })
    }

    pub fn device(&self) -> &Device<TabHost> {
        &self.device
    }

    /// Take one event; its actions wait in [`Tab::next_action`].
    pub fn handle(&mut self, event: Event<'_>, now: Instant) {
        self.device.handle(event, now);
    }

    /// A button went down or up; false for a name the board does not have.
    pub fn button(&mut self, name: &str, down: bool, now: Instant) -> bool {
        let Some(button) = Button::from_name(name) else {
            return false;
        };
        let event = if down {
            Event::ButtonDown(button)
        } else {
            Event::ButtonUp(button)
        };
        self.device.handle(event, now);
        true
    }

    pub fn timeout(&mut self, now: Instant) {
        self.device.handle_timeout(now);
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.device.next_deadline()
    }

    /// Type a message to the agent; why not, if it was refused.
    pub fn send_text(&mut self, text: &str, now: Instant) -> Result<(), String> {
        self.device
            .send_text(text, now)
            .map_err(|err| err.to_string())
    }

    /// Add an action of the page's (its spec as in `hello`), for the next `hello`.
    pub fn register_action(&mut self, spec: &str) -> Result<(), String> {
        let spec: ActionSpec = serde_json::from_str(spec).map_err(|err| err.to_string())?;
        self.device
            .register_action(spec)
            .map_err(|err| err.to_string())
    }

    /// Answer an invoked action: `{"id", "result"}` or `{"id", "error"}`.
    pub fn complete_action(&mut self, answer: &str) -> Result<(), String> {
        let answer: Value = serde_json::from_str(answer).map_err(|err| err.to_string())?;
        let id = answer.get("id").and_then(Value::as_str).unwrap_or_default();
        let result = match answer.get("error") {
            Some(error) => Err(error.as_str().unwrap_or("failed").to_string()),
            None => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
        };
        self.device
            .complete_action(id, result)
            .map_err(|err| err.to_string())
    }

    /// The next thing the page must do, as `{"do": …}`; its bulk (a binary frame, PCM16
    /// samples little-endian) replaces what `bulk` held.
    pub fn next_action(&mut self, bulk: &mut Vec<u8>) -> Option<Value> {
        bulk.clear();
        let action = match self.device.poll_action()? {
            Action::Connect => json!({"do": "connect"}),
            Action::Close { code, reason } => {
                json!({"do": "close", "code": code, "reason": reason})
            }
            Action::Send(message) => {
                json!({"do": "send", "text": message.encode(), "log": logged(&message)})
            }
            Action::SendBinary(frame) => {
                *bulk = frame;
                json!({"do": "send_binary"})
            }
            Action::Redraw => json!({"do": "redraw"}),
            Action::StartMic => json!({"do": "start_mic"}),
            Action::StopMic => json!({"do": "stop_mic"}),
            Action::Play { rate, samples } => {
                bulk.extend(samples.iter().flat_map(|s| s.to_le_bytes()));
                json!({"do": "play", "rate": rate})
            }
            Action::StopPlayback => json!({"do": "stop_playback"}),
            Action::SetVolume(percent) => json!({"do": "volume", "percent": percent}),
            Action::SetBrightness(percent) => json!({"do": "brightness", "percent": percent}),
            Action::StoreKey(key) => json!({"do": "store_key", "key": b64(&key)}),
            Action::Invoke { id, name, args } => {
                json!({"do": "invoke", "id": id, "name": name, "args": args})
            }
            Action::ConfirmFirmware => json!({"do": "confirm_firmware"}),
            Action::Rollback => json!({"do": "rollback"}),
            Action::Restart => json!({"do": "restart"}),
        };
        Some(action)
    }

    /// What the screen shows and the state around it, as JSON; a picture's RGB565
    /// pixels (little-endian, row-major) replace what `bulk` held.
    pub fn view(&self, bulk: &mut Vec<u8>) -> Value {
        bulk.clear();
        let device = &self.device;
        let view = device.view();
        let image = view.image.map(|image| {
            bulk.extend_from_slice(image.rgb565_le());
            json!({"width": image.width(), "height": image.height()})
        });
        json!({
            "screen": view.screen.name(),
            "status": view.status,
            "title": view.title,
            "lines": view.lines,
            "page": view.page,
            "pages": view.pages,
            "notice": view.notice,
            "image": image,
            "answers_from": view.answers_from.map(Instant::as_millis),
            "phase": device.phase().name(),
            "mode": device.mode().name(),
            "paired": device.is_paired(),
            "setup_needed": device.setup_needed().map(|code| code.as_str()),
            "volume": device.volume(),
            "device_id": device.identity().device_id(),
        })
    }
}

/// The board as the page draws it: screen, text area, picture box, audio rates.
pub fn board_json() -> Value {
    let config = board("", None);
    let display = config.display.as_ref();
    json!({
        "width": display.map(|d| d.width),
        "height": display.map(|d| d.height),
        "text_cols": display.map(|d| d.text_cols),
        "text_rows": display.map(|d| d.text_rows),
        "image": config.image_box().map(|i| json!({"width": i.width, "height": i.height})),
        "mic_rate": config.mic_rate,
        "speaker_rate": config.speaker_rate,
    })
}

/// A message as the page's log shows it: never the key or a MAC; a `hello` (which may
/// carry the access token) by its device id alone.
fn logged(message: &DeviceMessage) -> String {
    match message {
        DeviceMessage::Hello(hello) => format!("hello {}", hello.device_id),
        DeviceMessage::Auth(auth) => {
            let hidden = |value: &Option<String>, shown: &str| value.as_ref().map(|_| shown.into());
            let shown = Auth {
                key: hidden(&auth.key, "<the device key>"),
                mac: hidden(&auth.mac, "<mac>"),
            };
            DeviceMessage::Auth(shown).encode()
        }
        other => other.encode(),
    }
}

#[cfg(test)]
mod tests;
