//! The boards the simulator can be.
//!
//! Each profile is a kind of board people build gadgets on, so what the server decides
//! from `hello.caps` (text folded to ASCII, the image box, no audio for a board without a
//! speaker, no paging without UP and DOWN) can be tried without the hardware. The text
//! area follows from the screen and a fixed-width font; the image box is the screen less
//! its status bar (on the round screen, the square inside the circle).

use herald_device::{Button, DeviceConfig, DisplayProfile, ImageSize};

/// A board profile, as `--board` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Board {
    /// The reference board: 320×240 colour, ASCII font, mic and speaker, four buttons
    Breadboard,
    /// A stick: 240×135 colour, mic and speaker, two buttons (TALK and CANCEL)
    Stick,
    /// A cube: 240×240 colour, mic but no speaker, four buttons
    Cube,
    /// A round 466×466 screen, mic and a 24 kHz speaker, four buttons
    Round,
}

/// Flash the stick, cube and round boards set aside for an update.
const OTA_PARTITION: u64 = 3 * 1024 * 1024;

impl Board {
    /// The profile's name on the command line (and in the default state directory).
    pub fn name(self) -> &'static str {
        match self {
            Board::Breadboard => "breadboard",
            Board::Stick => "stick",
            Board::Cube => "cube",
            Board::Round => "round",
        }
    }

    /// Whether the screen is round: the terminal leaves out what a round glass hides.
    pub fn is_round(self) -> bool {
        self == Board::Round
    }

    /// The board's configuration; the firmware version is the one a fresh board ships.
    pub fn config(self, name: &str) -> DeviceConfig {
        let reference = DeviceConfig::reference(name);
        let screen = |width, height, text_cols, text_rows, image: (u32, u32)| DisplayProfile {
            width,
            height,
            color: true,
            charset: "utf8".to_owned(),
            text_cols,
            text_rows,
            image: Some(ImageSize {
                width: image.0,
                height: image.1,
            }),
        };
        match self {
            Board::Breadboard => reference,
            Board::Stick => DeviceConfig {
                board: "esp32s3-stick".to_owned(),
                display: Some(screen(240, 135, 26, 6, (240, 115))),
                inputs: vec![Button::Talk, Button::Cancel],
                ota_max_size: Some(OTA_PARTITION),
                ..reference
            },
            Board::Cube => DeviceConfig {
                board: "esp32s3-cube".to_owned(),
                display: Some(screen(240, 240, 20, 11, (240, 216))),
                speaker_rate: None,
                ota_max_size: Some(OTA_PARTITION),
                ..reference
            },
            Board::Round => DeviceConfig {
                board: "esp32s3-round".to_owned(),
                display: Some(screen(466, 466, 20, 9, (328, 328))),
                speaker_rate: Some(24_000),
                ota_max_size: Some(OTA_PARTITION),
                ..reference
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;
    use herald_gadget_proto::limits::MAX_BOARD;
    use herald_gadget_proto::ota_image::is_board_char;

    #[test]
    fn every_profile_is_a_board_the_server_accepts() {
        for board in Board::value_variants() {
            let config = board.config("Sim");
            let name = &config.board;
            assert!(
                name.len() <= MAX_BOARD && name.bytes().all(is_board_char),
                "{name}"
            );
            let display = config.display.as_ref().unwrap();
            let image = display.image.unwrap();
            assert!(image.width <= display.width && image.height <= display.height);
            assert!(config.inputs.contains(&Button::Talk) && config.mic_rate.is_some());
            assert_eq!(board.to_possible_value().unwrap().get_name(), board.name());
        }
    }

    #[test]
    fn the_profiles_differ_where_the_issue_asks() {
        let breadboard = Board::Breadboard.config("Sim");
        assert_eq!(breadboard, DeviceConfig::reference("Sim"));
        assert_eq!(breadboard.display.unwrap().charset, "ascii");
        let stick = Board::Stick.config("Sim").display.unwrap();
        assert_eq!((stick.width, stick.height), (240, 135));
        let cube = Board::Cube.config("Sim");
        assert_eq!(cube.speaker_rate, None);
        assert_eq!(cube.display.map(|d| (d.width, d.height)), Some((240, 240)));
        // The image box of the round screen fits inside its circle.
        let round = Board::Round.config("Sim").display.unwrap();
        let image = round.image.unwrap();
        let diagonal = f64::from(image.width).hypot(f64::from(image.height));
        assert!(diagonal <= f64::from(round.width));
        assert!(Board::Round.is_round() && !Board::Cube.is_round());
    }
}
