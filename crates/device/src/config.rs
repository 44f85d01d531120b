//! The board profile: what the device is and has, fixed for the life of a [`crate::Device`].
//!
//! It becomes the `caps` of `hello`, and the core reads the same numbers to lay out text,
//! size mic frames, bound the jitter buffer and accept or refuse images and firmware, so
//! what the device announces and what it does cannot disagree.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use herald_gadget_proto::{AudioCaps, Caps, DisplayCaps, ImageBox, OtaCaps};

/// The only sample and pixel formats protocol v1 defines.
pub(crate) const PCM16: &str = "pcm16";
pub(crate) const RGB565: &str = "rgb565";

/// A physical button of the gadget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Button {
    /// Push-to-talk; also answers a prompt "yes".
    Talk,
    /// Stops what is going on; answers a prompt "no"; held 2 s starts a new conversation.
    Cancel,
    /// Previous page of text.
    Up,
    /// Next page of text.
    Down,
}

impl Button {
    /// Every button, in `caps.inputs` order.
    pub const ALL: [Button; 4] = [Self::Talk, Self::Cancel, Self::Up, Self::Down];

    /// The name in `caps.inputs`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Talk => "talk",
            Self::Cancel => "cancel",
            Self::Up => "up",
            Self::Down => "down",
        }
    }

    /// The button with this `caps.inputs` name.
    pub fn from_name(name: &str) -> Option<Button> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The box images are fitted into, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSize {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// A screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayProfile {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Whether the screen shows colour.
    pub color: bool,
    /// Characters the font has: `ascii` makes the server fold text to ASCII.
    pub charset: String,
    /// Characters per line of the text area.
    pub text_cols: u16,
    /// Lines of the text area; longer text is paged with UP and DOWN.
    pub text_rows: u16,
    /// The largest image shown; `None` for a device that shows no images.
    pub image: Option<ImageSize>,
}

/// Everything the core needs to know about the board it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Human-readable name shown to the owner.
    pub name: String,
    /// Board name; firmware images must carry the tag `HGBOARD=<board>`.
    pub board: String,
    /// Version of the running firmware.
    pub firmware: String,
    /// Access token, when the host sets `GADGET_ACCESS_TOKEN`.
    pub token: Option<String>,
    /// The screen, if any.
    pub display: Option<DisplayProfile>,
    /// Microphone sample rate (PCM16 mono); `None` for a device without one.
    pub mic_rate: Option<u32>,
    /// Speaker sample rate (PCM16 mono); `None` for a device without one.
    pub speaker_rate: Option<u32>,
    /// The buttons the board has.
    pub inputs: Vec<Button>,
    /// Largest firmware image the device installs; `None` disables updates.
    pub ota_max_size: Option<u64>,
}

impl DeviceConfig {
    /// The reference board of the protocol documents: an ESP32-S3 on a breadboard with a
    /// 320×240 colour screen, mic and speaker at 16 kHz, four buttons and a 1.9 MiB
    /// update partition.
    pub fn reference(name: &str) -> DeviceConfig {
        DeviceConfig {
            name: name.to_string(),
            board: "esp32s3-breadboard".to_string(),
            firmware: "0.1.0".to_string(),
            token: None,
            display: Some(DisplayProfile {
                width: 320,
                height: 240,
                color: true,
                charset: "ascii".to_string(),
                text_cols: 25,
                text_rows: 8,
                image: Some(ImageSize {
                    width: 320,
                    height: 196,
                }),
            }),
            mic_rate: Some(16_000),
            speaker_rate: Some(16_000),
            inputs: Button::ALL.to_vec(),
            ota_max_size: Some(2_031_616),
        }
    }

    /// The `caps` object of `hello`.
    pub fn caps(&self) -> Caps {
        let audio = |rate: u32| AudioCaps {
            rate,
            format: PCM16.to_string(),
        };
        Caps {
            display: self.display.as_ref().map(|d| DisplayCaps {
                width: Some(d.width),
                height: Some(d.height),
                color: Some(d.color),
                charset: Some(d.charset.clone()),
                text_cols: Some(u32::from(d.text_cols)),
                text_rows: Some(u32::from(d.text_rows)),
                image: d.image.map(|i| ImageBox {
                    width: i.width,
                    height: i.height,
                    format: RGB565.to_string(),
                }),
            }),
            mic: self.mic_rate.map(audio),
            speaker: self.speaker_rate.map(audio),
            inputs: self.inputs.iter().map(|b| b.name().to_string()).collect(),
            talk_mode: self
                .mic_rate
                .filter(|_| self.has(Button::Talk))
                .map(|_| "hold".to_string()),
            ota: self.ota_max_size.map(|max_size| OtaCaps { max_size }),
        }
    }

    /// Whether the board has this button.
    pub fn has(&self, button: Button) -> bool {
        self.inputs.contains(&button)
    }

    /// The image box, when the device shows images.
    pub fn image_box(&self) -> Option<ImageSize> {
        self.display.as_ref().and_then(|d| d.image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_caps_match_the_seed_example() {
        let caps = DeviceConfig::reference("Kitchen Gadget").caps();
        let json = serde_json::to_string(&caps).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"display":{"width":320,"height":240,"color":true,"charset":"ascii","#,
                r#""text_cols":25,"text_rows":8,"image":{"width":320,"height":196,"format":"rgb565"}},"#,
                r#""mic":{"rate":16000,"format":"pcm16"},"speaker":{"rate":16000,"format":"pcm16"},"#,
                r#""inputs":["talk","cancel","up","down"],"talk_mode":"hold","ota":{"max_size":2031616}}"#
            )
        );
    }

    #[test]
    fn absent_parts_are_left_out() {
        let config = DeviceConfig {
            display: None,
            mic_rate: None,
            speaker_rate: None,
            inputs: alloc::vec![Button::Cancel],
            ota_max_size: None,
            ..DeviceConfig::reference("x")
        };
        let json = serde_json::to_string(&config.caps()).unwrap();
        assert_eq!(json, r#"{"inputs":["cancel"]}"#);
    }

    #[test]
    fn button_names_round_trip() {
        for b in Button::ALL {
            assert_eq!(Button::from_name(b.name()), Some(b));
        }
        assert_eq!(Button::from_name("TALK"), None);
    }
}
