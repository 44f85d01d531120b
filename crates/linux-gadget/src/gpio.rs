//! The physical side of the gadget: buttons, the status LED and the outputs.
//!
//! Everything here is logic over a [`Gpio`] (set a line) and a stream of [`RawEdge`]s
//! (a line changed), so it is tested with a double and runs on the kernel's GPIO
//! character device through [`cdev`] (Linux only). Time is passed in as a [`Duration`]
//! since the start, the way the device core takes its `Instant`.
//!
//! - [`Buttons`]: each line is debounced by settling (a level counts once it held for
//!   the window; a bounce back cancels it) and mapped active-low by default, the line's
//!   pull-up holding it high until the button closes it to ground.
//! - [`led_pattern`]: the status LED's pattern for what the device is doing.
//! - [`Outputs`]: each configured line is an application action `output.NAME` with a
//!   boolean `on`; all start off and go off again on a clean stop.

#[cfg(target_os = "linux")]
pub mod cdev;

use std::time::Duration;

use herald_device::{Button, Phase, Screen};
use herald_gadget_proto::ActionSpec;
use serde_json::{json, Value};

use super::config::{GpioConfig, OutputConfig};

/// Why a line could not be read or set.
#[derive(Debug, thiserror::Error)]
pub enum GpioError {
    #[error("cannot open GPIO lines on {chip}: {message}")]
    Open { chip: String, message: String },
    #[error("GPIO line {line}: {message}")]
    Line { line: u32, message: String },
}

/// Setting output lines (the status LED and the outputs); `high` is the electrical level.
pub trait Gpio: Send {
    fn set(&mut self, line: u32, high: bool) -> Result<(), GpioError>;
}

/// An input line changed to `high` (the electrical level) at `at` since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEdge {
    pub line: u32,
    pub high: bool,
    pub at: Duration,
}

/// One line's level, trusted once it has held for the window.
#[derive(Debug, Clone)]
struct Debounce {
    stable: bool,
    /// A different level seen, and when it will have held long enough.
    pending: Option<(bool, Duration)>,
}

impl Debounce {
    fn edge(&mut self, level: bool, at: Duration, window: Duration) {
        self.pending = (level != self.stable).then_some((level, at + window));
    }

    fn poll(&mut self, now: Duration) -> Option<bool> {
        match self.pending {
            Some((level, due)) if now >= due => {
                self.pending = None;
                self.stable = level;
                Some(level)
            }
            _ => None,
        }
    }
}

/// The button lines.
#[derive(Debug, Clone)]
pub struct Buttons {
    lines: Vec<(u32, Button, Debounce)>,
    active_low: bool,
    window: Duration,
}

impl Buttons {
    /// The buttons `config` wires. Every button starts released, whatever its line reads:
    /// one held while the service starts counts only once let go and pressed again.
    pub fn new(config: &GpioConfig) -> Buttons {
        let wired = [
            (config.talk, Button::Talk),
            (config.cancel, Button::Cancel),
            (config.up, Button::Up),
            (config.down, Button::Down),
        ];
        // Released, an active-low button's line is pulled high.
        let released = config.buttons_active_low;
        Buttons {
            lines: wired
                .into_iter()
                .filter_map(|(line, button)| {
                    let debounce = Debounce {
                        stable: released,
                        pending: None,
                    };
                    line.map(|line| (line, button, debounce))
                })
                .collect(),
            active_low: config.buttons_active_low,
            window: Duration::from_millis(config.debounce_ms),
        }
    }

    /// The input lines to watch.
    pub fn lines(&self) -> Vec<u32> {
        self.lines.iter().map(|(line, ..)| *line).collect()
    }

    /// Whether the buttons are active low (so their lines want a pull-up).
    pub fn active_low(&self) -> bool {
        self.active_low
    }

    pub fn edge(&mut self, edge: RawEdge) {
        let window = self.window;
        if let Some((.., debounce)) = self.lines.iter_mut().find(|(l, ..)| *l == edge.line) {
            debounce.edge(edge.high, edge.at, window);
        }
    }

    /// The presses (`true`) and releases that have settled by `now`.
    pub fn poll(&mut self, now: Duration) -> Vec<(Button, bool)> {
        let active_low = self.active_low;
        self.lines
            .iter_mut()
            .filter_map(|(_, button, debounce)| {
                debounce.poll(now).map(|high| (*button, high != active_low))
            })
            .collect()
    }

    /// When to call [`Buttons::poll`] next.
    pub fn deadline(&self) -> Option<Duration> {
        self.lines
            .iter()
            .filter_map(|(.., d)| d.pending.map(|(_, due)| due))
            .min()
    }
}

/// What the status LED does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedPattern {
    Off,
    On,
    /// Lit for `on`, dark for `off`, repeating.
    Blink {
        on: Duration,
        off: Duration,
    },
}

impl LedPattern {
    /// Whether the LED is lit at `now`.
    pub fn lit(self, now: Duration) -> bool {
        match self {
            LedPattern::Off => false,
            LedPattern::On => true,
            LedPattern::Blink { on, off } => {
                let period = (on + off).as_millis().max(1);
                now.as_millis() % period < on.as_millis()
            }
        }
    }

    /// When the LED next changes, after `now`.
    pub fn next_change(self, now: Duration) -> Option<Duration> {
        let LedPattern::Blink { on, off } = self else {
            return None;
        };
        let period = (on + off).as_millis().max(1);
        let into = now.as_millis() % period;
        let wait = if into < on.as_millis() {
            on.as_millis() - into
        } else {
            period - into
        };
        Some(now + Duration::from_millis(u64::try_from(wait).unwrap_or(1)))
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Recording: fast blink. Waiting for pairing: slow even blink. Online: steady, or with
/// a short dark gap every two seconds while a sound card has failed. Offline or
/// connecting: a short flash every two seconds. Refused (setup): dark.
pub fn led_pattern(
    phase: Phase,
    screen: Screen,
    recording: bool,
    sound_failed: bool,
) -> LedPattern {
    match (phase, screen) {
        _ if recording => LedPattern::Blink {
            on: ms(100),
            off: ms(100),
        },
        (_, Screen::Setup) => LedPattern::Off,
        (_, Screen::Pairing) => LedPattern::Blink {
            on: ms(500),
            off: ms(500),
        },
        (Phase::Online, _) if sound_failed => LedPattern::Blink {
            on: ms(1800),
            off: ms(200),
        },
        (Phase::Online, _) => LedPattern::On,
        _ => LedPattern::Blink {
            on: ms(100),
            off: ms(1900),
        },
    }
}

/// Prefix of the outputs' action names.
pub const OUTPUT_PREFIX: &str = "output.";

/// The output lines and whether each is on.
#[derive(Debug, Clone)]
pub struct Outputs {
    lines: Vec<(OutputConfig, bool)>,
}

impl Outputs {
    pub fn new(outputs: &[OutputConfig]) -> Outputs {
        Outputs {
            lines: outputs.iter().map(|o| (o.clone(), false)).collect(),
        }
    }

    /// The device actions, one per output.
    pub fn specs(&self) -> Vec<ActionSpec> {
        self.lines
            .iter()
            .map(|(output, _)| {
                let what = output.description.as_deref().unwrap_or("an output line");
                ActionSpec {
                    name: format!("{OUTPUT_PREFIX}{}", output.name),
                    description: Some(format!(
                        "Switch {} on or off. It switches: {what}",
                        output.name
                    )),
                    params: Some(json!({
                        "type": "object",
                        "properties": {"on": {"type": "boolean", "description": "true switches it on"}},
                        "required": ["on"],
                    })),
                }
            })
            .collect()
    }

    /// The lines with their "off" level, to request them with.
    pub fn initial(&self) -> Vec<(u32, bool)> {
        self.lines
            .iter()
            .map(|(o, _)| (o.line, o.active_low))
            .collect()
    }

    /// Each output's name and whether it is on.
    pub fn states(&self) -> Vec<(String, bool)> {
        self.lines
            .iter()
            .map(|(o, on)| (o.name.clone(), *on))
            .collect()
    }

    /// Runs the action `name` with `args` (`{"on": bool}`).
    pub fn invoke(
        &mut self,
        name: &str,
        args: &Value,
        gpio: &mut dyn Gpio,
    ) -> Result<Value, String> {
        let wanted = name.strip_prefix(OUTPUT_PREFIX);
        let Some((output, state)) = self
            .lines
            .iter_mut()
            .find(|(o, _)| Some(o.name.as_str()) == wanted)
        else {
            return Err(format!("unknown action {name}"));
        };
        let Some(on) = args.get("on").and_then(Value::as_bool) else {
            return Err("on (true or false) is required".to_owned());
        };
        gpio.set(output.line, on != output.active_low)
            .map_err(|e| e.to_string())?;
        *state = on;
        Ok(json!({ "on": on }))
    }

    /// Switches every output off; returns the failures.
    pub fn all_off(&mut self, gpio: &mut dyn Gpio) -> Vec<GpioError> {
        let mut failed = Vec::new();
        for (output, state) in &mut self.lines {
            match gpio.set(output.line, output.active_low) {
                Ok(()) => *state = false,
                Err(e) => failed.push(e),
            }
        }
        failed
    }
}

#[cfg(test)]
pub mod double {
    //! A [`Gpio`] that remembers what was set.
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Clone, Default)]
    pub struct FakeGpio {
        pub levels: Arc<Mutex<BTreeMap<u32, bool>>>,
        pub broken: Option<u32>,
    }

    impl FakeGpio {
        pub fn level(&self, line: u32) -> Option<bool> {
            self.levels.lock().unwrap().get(&line).copied()
        }
    }

    impl Gpio for FakeGpio {
        fn set(&mut self, line: u32, high: bool) -> Result<(), GpioError> {
            if self.broken == Some(line) {
                return Err(GpioError::Line {
                    line,
                    message: "broken".to_owned(),
                });
            }
            self.levels.lock().unwrap().insert(line, high);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::double::FakeGpio;
    use super::*;
    use crate::config::GadgetConfig;

    fn gpio(extra: &str) -> GpioConfig {
        let text = format!("server = \"ws://x\"\nname = \"x\"\n[gpio]\n{extra}");
        GadgetConfig::parse(&text).unwrap().gpio.unwrap()
    }

    fn edge(line: u32, high: bool, at: u64) -> RawEdge {
        RawEdge {
            line,
            high,
            at: ms(at),
        }
    }

    #[test]
    fn a_bouncing_press_counts_once_and_only_after_it_settles() {
        let mut buttons = Buttons::new(&gpio("talk = 17\ncancel = 27\ndebounce_ms = 30"));
        assert_eq!(buttons.lines(), vec![17, 27]);
        assert!(buttons.active_low());
        // Pulled up: pressing pulls the line low, with bounces.
        for (high, at) in [(false, 0), (true, 3), (false, 5), (true, 9), (false, 12)] {
            buttons.edge(edge(17, high, at));
        }
        assert_eq!(buttons.deadline(), Some(ms(42)));
        assert_eq!(buttons.poll(ms(41)), vec![]);
        assert_eq!(buttons.poll(ms(42)), vec![(Button::Talk, true)]);
        assert_eq!(buttons.deadline(), None);
        // A glitch shorter than the window is no release.
        buttons.edge(edge(17, true, 100));
        buttons.edge(edge(17, false, 110));
        assert_eq!(buttons.poll(ms(200)), vec![]);
        // Let go: the line goes back high.
        buttons.edge(edge(17, true, 300));
        assert_eq!(buttons.poll(ms(330)), vec![(Button::Talk, false)]);
        // An unknown line is ignored.
        buttons.edge(edge(5, false, 400));
        assert_eq!(buttons.deadline(), None);
    }

    #[test]
    fn active_high_buttons_press_on_a_high_level() {
        let mut buttons = Buttons::new(&gpio(
            "cancel = 27\nbuttons_active_low = false\ndebounce_ms = 10",
        ));
        assert!(!buttons.active_low());
        buttons.edge(edge(27, true, 0));
        assert_eq!(buttons.poll(ms(10)), vec![(Button::Cancel, true)]);
        buttons.edge(edge(27, false, 50));
        assert_eq!(buttons.poll(ms(60)), vec![(Button::Cancel, false)]);
    }

    #[test]
    fn the_led_tells_the_state_apart() {
        let offline = led_pattern(Phase::Offline, Screen::Offline, false, false);
        let pairing = led_pattern(Phase::Online, Screen::Pairing, false, false);
        let online = led_pattern(Phase::Online, Screen::Ready, false, false);
        let recording = led_pattern(Phase::Online, Screen::Listening, true, false);
        let no_sound = led_pattern(Phase::Online, Screen::Ready, false, true);
        assert_eq!(online, LedPattern::On);
        assert_eq!(
            led_pattern(Phase::Offline, Screen::Setup, false, true),
            LedPattern::Off
        );
        // Offline says more than a failed card: it cannot be heard anyway.
        assert_eq!(
            led_pattern(Phase::Offline, Screen::Offline, false, true),
            offline
        );
        let all = [offline, pairing, online, recording, no_sound];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // Offline: a 100 ms flash every 2 s.
        assert!(offline.lit(ms(50)) && !offline.lit(ms(150)) && offline.lit(ms(2050)));
        assert_eq!(offline.next_change(ms(50)), Some(ms(100)));
        assert_eq!(offline.next_change(ms(150)), Some(ms(2000)));
        assert!(pairing.lit(ms(499)) && !pairing.lit(ms(500)));
        assert_eq!(online.next_change(ms(5)), None);
        assert!(!LedPattern::Off.lit(ms(0)));
    }

    #[test]
    fn outputs_are_actions_with_a_boolean_on() {
        let config = gpio(
            "[[gpio.outputs]]\nname = \"lamp\"\nline = 23\ndescription = \"The desk lamp.\"\n\
             [[gpio.outputs]]\nname = \"relay\"\nline = 24\nactive_low = true",
        );
        let mut outputs = Outputs::new(&config.outputs);
        let specs = outputs.specs();
        assert_eq!(specs[0].name, "output.lamp");
        assert!(specs[0]
            .description
            .as_deref()
            .unwrap()
            .contains("The desk lamp."));
        assert_eq!(specs[1].params.as_ref().unwrap()["required"], json!(["on"]));
        // Requested off: low, and high for the active-low relay.
        assert_eq!(outputs.initial(), vec![(23, false), (24, true)]);

        let mut gpio = FakeGpio::default();
        let on = json!({"on": true});
        assert_eq!(
            outputs.invoke("output.lamp", &on, &mut gpio),
            Ok(json!({"on": true}))
        );
        assert_eq!(gpio.level(23), Some(true));
        outputs.invoke("output.relay", &on, &mut gpio).unwrap();
        assert_eq!(gpio.level(24), Some(false));
        assert!(outputs.invoke("output.fan", &on, &mut gpio).is_err());
        let err = outputs
            .invoke("output.lamp", &json!({"on": "yes"}), &mut gpio)
            .unwrap_err();
        assert!(err.contains("on"), "{err}");
        assert_eq!(
            outputs.states(),
            vec![("lamp".into(), true), ("relay".into(), true)]
        );

        // A line that fails leaves the state as it was and says so.
        let mut broken = FakeGpio {
            broken: Some(23),
            ..gpio.clone()
        };
        assert!(outputs
            .invoke("output.lamp", &json!({"on": false}), &mut broken)
            .is_err());
        assert!(outputs.states()[0].1);

        assert!(outputs.all_off(&mut gpio).is_empty());
        assert_eq!((gpio.level(23), gpio.level(24)), (Some(false), Some(true)));
        assert!(outputs.states().iter().all(|(_, on)| !on));
    }
}
