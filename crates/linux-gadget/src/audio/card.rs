//! Real sound cards through cpal: ALSA's devices, which include PulseAudio's and
//! PipeWire's (`pulse`, `pipewire`, `default`) where those run.
//!
//! cpal's streams must stay on the thread that made them, so one thread owns the cards:
//! [`CardSound`] sends it commands. The microphone's stream is opened when recording
//! starts and closed when it stops; the speaker's is opened at the first sound and kept,
//! playing silence when nothing is queued. Each card runs at its default configuration
//! and [`Capture`] / [`Render`] convert.

use std::collections::VecDeque;
use std::sync::{mpsc as std_mpsc, Arc, Mutex};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use tokio::sync::mpsc;

use super::{Capture, Render};
use herald_sim::runner::LiveSound;

/// Mic frames waiting for the runner (2.5 s): more means it stopped reading.
const MIC_QUEUE: usize = 64;
/// A gap in what the core plays this long is a pause: the resampler is flushed.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(150);
/// Most speaker audio queued, in seconds of the card's frames.
const MAX_QUEUED_SECS: usize = 30;

/// Why a card could not be found or used.
#[derive(Debug, thiserror::Error)]
pub enum SoundError {
    #[error("the sound system failed: {0}")]
    System(String),
    #[error("no {kind} device {spec:?}; `herald gadget audio-devices` lists them")]
    NotFound { kind: &'static str, spec: String },
    #[error(
        "{spec:?} matches several {kind} devices ({names}); give more of the name or the index"
    )]
    Ambiguous {
        kind: &'static str,
        spec: String,
        names: String,
    },
    #[error("{name}: {message}")]
    Device { name: String, message: String },
}

fn system(e: impl std::fmt::Display) -> SoundError {
    SoundError::System(e.to_string())
}

/// One device as `audio-devices` lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub index: usize,
    /// ALSA's name for it (`pulse`, `hw:CARD=Device,DEV=0`), as a config names it.
    pub id: String,
    /// What it is, for a person.
    pub name: String,
    /// The default input (rate, channels), for a device that records.
    pub input: Option<(u32, u16)>,
    /// The default output (rate, channels), for a device that plays.
    pub output: Option<(u32, u16)>,
}

/// Every device, in the order indexes refer to.
pub fn list() -> Result<Vec<Listed>, SoundError> {
    let host = cpal::default_host();
    let devices = host.devices().map_err(system)?;
    Ok(devices
        .enumerate()
        .map(|(index, device)| Listed {
            index,
            id: alsa_id(&device),
            name: device.to_string(),
            input: device
                .default_input_config()
                .ok()
                .map(|c| (c.sample_rate(), c.channels())),
            output: device
                .default_output_config()
                .ok()
                .map(|c| (c.sample_rate(), c.channels())),
        })
        .collect())
}

/// The device's ALSA name (`pulse`), or empty when it has none.
fn alsa_id(device: &cpal::Device) -> String {
    device.id().map(|id| id.id().to_owned()).unwrap_or_default()
}

/// The device `spec` names: `default`, an index from [`list`], an ALSA name
/// (`pulse`, `hw:CARD=Device,DEV=0`), a whole description, or the one description that
/// contains it (case-insensitive).
fn find(spec: &str, input: bool) -> Result<cpal::Device, SoundError> {
    let kind = if input { "input" } else { "output" };
    let host = cpal::default_host();
    if spec == "default" {
        let device = if input {
            host.default_input_device()
        } else {
            host.default_output_device()
        };
        return device.ok_or_else(|| SoundError::NotFound {
            kind,
            spec: spec.to_owned(),
        });
    }
    let mut devices: Vec<cpal::Device> = host.devices().map_err(system)?.collect();
    if let Ok(index) = spec.parse::<usize>() {
        if index < devices.len() {
            return Ok(devices.swap_remove(index));
        }
    }
    let usable = |d: &cpal::Device| {
        if input {
            d.default_input_config().is_ok()
        } else {
            d.default_output_config().is_ok()
        }
    };
    devices.retain(usable);
    if let Some(at) = devices
        .iter()
        .position(|d| alsa_id(d) == spec || d.to_string() == spec)
    {
        return Ok(devices.swap_remove(at));
    }
    let wanted = spec.to_lowercase();
    devices.retain(|d| d.to_string().to_lowercase().contains(&wanted));
    match devices.len() {
        0 => Err(SoundError::NotFound {
            kind,
            spec: spec.to_owned(),
        }),
        1 => Ok(devices.swap_remove(0)),
        _ => Err(SoundError::Ambiguous {
            kind,
            spec: spec.to_owned(),
            names: devices
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

enum Command {
    StartMic(u32, mpsc::Sender<Result<Vec<i16>, String>>),
    StopMic,
    Play(u32, Vec<i16>),
    StopPlayback,
}

/// The cards, driven from their thread.
pub struct CardSound {
    commands: std_mpsc::Sender<Command>,
}

impl CardSound {
    /// Finds the devices (failing here for a name that matches none) and starts the
    /// thread; it ends when this is dropped.
    pub fn open(input: Option<&str>, output: Option<&str>) -> Result<CardSound, SoundError> {
        let input = input.map(|spec| find(spec, true)).transpose()?;
        let output = output.map(|spec| find(spec, false)).transpose()?;
        let (commands, inbox) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("sound".to_owned())
            .spawn(move || run(input, output, &inbox))
            .map_err(system)?;
        Ok(CardSound { commands })
    }

    fn send(&self, command: Command) {
        // The thread ends only when this is dropped.
        let _ = self.commands.send(command);
    }
}

impl LiveSound for CardSound {
    fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>> {
        let (frames, receiver) = mpsc::channel(MIC_QUEUE);
        self.send(Command::StartMic(rate, frames));
        receiver
    }

    fn stop_mic(&mut self) {
        self.send(Command::StopMic);
    }

    fn play(&mut self, rate: u32, samples: &[i16]) {
        self.send(Command::Play(rate, samples.to_vec()));
    }

    fn stop_playback(&mut self) {
        self.send(Command::StopPlayback);
    }
}

struct Speaker {
    _stream: cpal::Stream,
    render: Render,
    queue: Arc<Mutex<VecDeque<i16>>>,
    capacity: usize,
}

impl Speaker {
    fn queue(&self, samples: &[i16]) {
        let mut queue = locked(&self.queue);
        let room = self.capacity.saturating_sub(queue.len());
        if room < samples.len() {
            tracing::warn!("the speaker is {MAX_QUEUED_SECS} s behind: audio dropped");
        }
        queue.extend(samples.iter().take(room));
    }
}

fn run(
    input: Option<cpal::Device>,
    output: Option<cpal::Device>,
    inbox: &std_mpsc::Receiver<Command>,
) {
    let mut mic = None;
    let mut speaker: Option<Speaker> = None;
    let mut rendered = Vec::new();
    loop {
        let command = match inbox.recv_timeout(PAUSE) {
            Ok(command) => command,
            Err(std_mpsc::RecvTimeoutError::Timeout) => {
                // Nothing to play for a while: what the resampler holds is played too.
                if let Some(speaker) = speaker.as_mut() {
                    rendered.clear();
                    match speaker.render.flush(&mut rendered) {
                        Ok(true) => speaker.queue(&rendered),
                        Ok(false) => {}
                        Err(e) => tracing::warn!("the speaker's audio cannot be converted: {e}"),
                    }
                }
                continue;
            }
            Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match command {
            Command::StartMic(rate, frames) => {
                mic = None;
                let opened = match &input {
                    Some(device) => open_mic(device, rate, frames.clone()),
                    None => Err("no microphone is configured".to_owned()),
                };
                match opened {
                    Ok(stream) => mic = Some(stream),
                    Err(why) => {
                        let _ = frames.try_send(Err(why));
                    }
                }
            }
            Command::StopMic => mic = None,
            Command::Play(rate, samples) => {
                if speaker.is_none() {
                    let Some(device) = &output else { continue };
                    match open_speaker(device) {
                        Ok(opened) => speaker = Some(opened),
                        Err(e) => {
                            tracing::warn!("the speaker cannot play: {e}");
                            continue;
                        }
                    }
                }
                let Some(speaker) = speaker.as_mut() else {
                    continue;
                };
                rendered.clear();
                if let Err(e) = speaker.render.push(rate, &samples, &mut rendered) {
                    tracing::warn!("the speaker's audio cannot be converted: {e}");
                    continue;
                }
                speaker.queue(&rendered);
            }
            Command::StopPlayback => {
                if let Some(speaker) = &speaker {
                    locked(&speaker.queue).clear();
                }
            }
        }
    }
    drop(mic);
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Opens the microphone; its 40 ms frames at `rate` go to `frames`. A failure is sent
/// there once, and then the channel closes: nothing after a gap is sent.
fn open_mic(
    device: &cpal::Device,
    rate: u32,
    frames: mpsc::Sender<Result<Vec<i16>, String>>,
) -> Result<cpal::Stream, String> {
    let name = device.to_string();
    let supported = device
        .default_input_config()
        .map_err(|e| format!("{name}: {e}"))?;
    let config = supported.config();
    let mut capture =
        Capture::new(config.sample_rate, config.channels, rate).map_err(|e| e.to_string())?;
    let weak = frames.downgrade();
    let on_error = move |e: cpal::Error| {
        if let Some(frames) = weak.upgrade() {
            let _ = frames.try_send(Err(format!("{e}")));
        }
    };
    let mut sender = Some(frames);
    let mut deliver = move |samples: &[i16]| {
        let Some(frames) = &sender else { return };
        let failed = match capture.push(samples) {
            Ok(ready) => ready.into_iter().any(|f| frames.try_send(Ok(f)).is_err()),
            Err(e) => {
                let _ = frames.try_send(Err(e.to_string()));
                true
            }
        };
        if failed {
            // Closing the channel tells the runner; a recording with a hole is not sent.
            sender = None;
        }
    };
    let built = match supported.sample_format() {
        cpal::SampleFormat::F32 => device.build_input_stream::<f32, _, _>(
            config,
            move |data: &[f32], _: &cpal::InputCallbackInfo| {
                let samples: Vec<i16> = data.iter().map(|s| to_i16(*s)).collect();
                deliver(&samples);
            },
            on_error,
            None,
        ),
        _ => device.build_input_stream::<i16, _, _>(
            config,
            move |data: &[i16], _: &cpal::InputCallbackInfo| deliver(data),
            on_error,
            None,
        ),
    };
    let stream = built.map_err(|e| format!("{name}: {e}"))?;
    stream.play().map_err(|e| format!("{name}: {e}"))?;
    Ok(stream)
}

fn to_i16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32767.0) as i16
}

fn open_speaker(device: &cpal::Device) -> Result<Speaker, SoundError> {
    let name = device.to_string();
    let failed = |e: &dyn std::fmt::Display| SoundError::Device {
        name: name.clone(),
        message: e.to_string(),
    };
    let supported = device.default_output_config().map_err(|e| failed(&e))?;
    let config = supported.config();
    let queue = Arc::new(Mutex::new(VecDeque::new()));
    let on_error = |e: cpal::Error| tracing::warn!("speaker: {e}");
    let built = match supported.sample_format() {
        cpal::SampleFormat::F32 => {
            let queue = queue.clone();
            device.build_output_stream::<f32, _, _>(
                config,
                move |out: &mut [f32], _: &cpal::OutputCallbackInfo| {
                    let mut queue = locked(&queue);
                    for sample in out.iter_mut() {
                        *sample = f32::from(queue.pop_front().unwrap_or(0)) / 32768.0;
                    }
                },
                on_error,
                None,
            )
        }
        _ => {
            let queue = queue.clone();
            device.build_output_stream::<i16, _, _>(
                config,
                move |out: &mut [i16], _: &cpal::OutputCallbackInfo| {
                    let mut queue = locked(&queue);
                    for sample in out.iter_mut() {
                        *sample = queue.pop_front().unwrap_or(0);
                    }
                },
                on_error,
                None,
            )
        }
    };
    let stream = built.map_err(|e| failed(&e))?;
    stream.play().map_err(|e| failed(&e))?;
    let render = Render::new(config.sample_rate, config.channels).map_err(|e| failed(&e))?;
    Ok(Speaker {
        _stream: stream,
        render,
        queue,
        capacity: MAX_QUEUED_SECS * config.sample_rate as usize * usize::from(config.channels),
    })
}
