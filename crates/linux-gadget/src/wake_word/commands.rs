//! `herald gadget wake-word`: record the owner saying the word, make the reference,
//! try it, and measure it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Subcommand;
use herald_gadget_proto::limits::AUDIO_FRAME_MS;
use herald_media::audio::{Decoder, FrameStream};

use super::{
    take, train, Spotter, WakeError, DEFAULT_SENSITIVITY, MARGIN, MAX_TAKES, MIN_TAKES, MODEL_FILE,
    TAKES_DIR,
};
use crate::audio::{pcm16_samples, DEVICE_RATE};

#[derive(Debug, Subcommand)]
pub enum WakeWordCommand {
    /// Record yourself saying the word, a few times, each checked for level and length
    Record {
        /// How many takes
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(MIN_TAKES as i64..=MAX_TAKES as i64))]
        takes: u8,
        /// The input device [default: [audio] input of --config, else default]
        #[arg(long)]
        input: Option<String>,
    },
    /// Make the wake word from the recorded takes (or from WAV files given)
    Train {
        /// The word, for the logs
        #[arg(long, default_value = "wake word")]
        name: String,
        /// WAV files to make it from instead of the recorded takes
        files: Vec<PathBuf>,
    },
    /// Listen for the word in a sound file and print each time it is heard, with its score
    Test {
        /// A sound file (WAV, MP3, Ogg, FLAC)
        file: PathBuf,
        #[arg(long, default_value_t = DEFAULT_SENSITIVITY)]
        sensitivity: f32,
    },
    /// Measure the word: how often it is heard in files that say it, how often it is
    /// heard in sound that does not, and how much of a core listening takes
    Bench {
        /// A directory of sound files that each say the word once
        #[arg(long)]
        positives: PathBuf,
        /// A directory of sound files that never say it
        #[arg(long)]
        negatives: PathBuf,
        #[arg(long, default_value_t = DEFAULT_SENSITIVITY)]
        sensitivity: f32,
    },
}

/// Runs `command` on the takes and the reference in `state_dir`; `input` is the
/// configured microphone.
pub fn run(
    command: WakeWordCommand,
    state_dir: &Path,
    input: Option<String>,
) -> anyhow::Result<()> {
    match command {
        WakeWordCommand::Record { takes, input: flag } => {
            let input = flag.or(input).unwrap_or_else(|| "default".to_owned());
            record::record(state_dir, &input, usize::from(takes))
        }
        WakeWordCommand::Train { name, files } => make(state_dir, &name, files),
        WakeWordCommand::Test { file, sensitivity } => {
            let mut spotter = spotter(state_dir, sensitivity)?;
            let audio = read(&file)?;
            let heard = listen(&mut spotter, &audio);
            for (at, score) in &heard {
                println!("{at:>8.2} s  heard (score {score:.2})");
            }
            println!(
                "heard {} time(s) in {:.1} s",
                heard.len(),
                seconds(audio.len())
            );
            Ok(())
        }
        WakeWordCommand::Bench {
            positives,
            negatives,
            sensitivity,
        } => bench(state_dir, &positives, &negatives, sensitivity),
    }
}

/// The wake word kept in a state directory, read once for however many spotters.
pub struct Reference {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl Reference {
    pub fn load(state_dir: &Path) -> anyhow::Result<Reference> {
        let path = state_dir.join(MODEL_FILE);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "no wake word at {}: record it (herald gadget wake-word record) and make it \
                 (herald gadget wake-word train)",
                path.display()
            )
        })?;
        Ok(Reference { path, bytes })
    }

    /// A spotter for it; a damaged file is named.
    pub fn spotter(&self, sensitivity: f32) -> anyhow::Result<Spotter> {
        Spotter::new(&self.bytes, sensitivity).map_err(|err| match err {
            WakeError::Reference(why) => anyhow::anyhow!(
                "the wake word at {} is damaged ({why}): make it again (herald gadget wake-word train)",
                self.path.display()
            ),
            other => other.into(),
        })
    }
}

/// A spotter for the reference kept in `state_dir`.
fn spotter(state_dir: &Path, sensitivity: f32) -> anyhow::Result<Spotter> {
    Reference::load(state_dir)?.spotter(sensitivity)
}

/// A sound file as 16 kHz mono samples.
fn read(path: &Path) -> anyhow::Result<Vec<i16>> {
    let decoder = Decoder::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut frames = FrameStream::new(decoder, DEVICE_RATE, AUDIO_FRAME_MS)?;
    let mut samples = Vec::new();
    while let Some(frame) = frames.next_frame()? {
        samples.extend(pcm16_samples(frame));
    }
    Ok(samples)
}

fn seconds(samples: usize) -> f64 {
    samples as f64 / f64::from(DEVICE_RATE)
}

/// Each time the word is heard in `audio`, fed as the microphone's 40 ms frames: when
/// (seconds from the start) and its score.
fn listen(spotter: &mut Spotter, audio: &[i16]) -> Vec<(f64, f32)> {
    let frame = (DEVICE_RATE * AUDIO_FRAME_MS / 1000) as usize;
    let mut heard = Vec::new();
    for (i, chunk) in audio.chunks(frame).enumerate() {
        if let Some(found) = spotter.hear(chunk) {
            heard.push((seconds((i + 1) * frame), found.score));
        }
    }
    heard
}

/// The takes' files in `state_dir`, in order.
fn takes_in(state_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let dir = state_dir.join(TAKES_DIR);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "wav"))
            .collect(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", dir.display())),
    };
    files.sort();
    Ok(files)
}

/// `train`: the reference from the takes (or `files`), kept in the state directory; how
/// each take scores against one made of the others says how consistent they are.
fn make(state_dir: &Path, name: &str, files: Vec<PathBuf>) -> anyhow::Result<()> {
    let files = match files.is_empty() {
        true => takes_in(state_dir)?,
        false => files,
    };
    let mut takes = Vec::new();
    for file in &files {
        let heard = read(file)?;
        takes.push(take(&heard).with_context(|| format!("{}", file.display()))?);
    }
    let reference = train(name, &takes)?;
    for (i, file) in files.iter().enumerate() {
        let others: Vec<Vec<i16>> = (0..takes.len())
            .filter(|j| *j != i)
            .map(|j| takes[j].clone())
            .collect();
        let score = match train(name, &others) {
            Ok(without) => {
                let mut spotter = Spotter::new(&without, DEFAULT_SENSITIVITY)?;
                let quiet = vec![0; DEVICE_RATE as usize / 2];
                // The take keeps a little quiet after the word: where the word ends.
                let word_ends = seconds(quiet.len() + takes[i].len().saturating_sub(MARGIN));
                let audio = [quiet.clone(), takes[i].clone(), quiet.clone(), quiet].concat();
                listen(&mut spotter, &audio)
                    .iter()
                    .map(|(at, score)| {
                        let after = at - word_ends;
                        format!(
                            "heard by the others {after:.2} s after the word (score {score:.2})"
                        )
                    })
                    .next()
                    .unwrap_or_else(|| "not heard by the others: say it again?".to_owned())
            }
            Err(_) => "-".to_owned(),
        };
        println!("{}  {score}", file.display());
    }
    let path = state_dir.join(MODEL_FILE);
    herald_files::create_private_dir(state_dir)?;
    herald_files::write_private(&path, &reference)?;
    println!(
        "made {} from {} takes; with [audio] wake_word = true the gadget listens for it \
         (restart it to take a new one)",
        path.display(),
        takes.len()
    );
    Ok(())
}

/// What `bench` measured.
#[derive(Debug)]
pub struct Report {
    /// Files that say the word, and those it was heard in.
    pub said: usize,
    pub heard_in: usize,
    /// Times it was heard in sound that does not say it, and how long that was.
    pub false_wakes: usize,
    pub other_s: f64,
    /// Time spent listening, for how much sound.
    pub busy_s: f64,
    pub sound_s: f64,
    /// How long after the word ended it was first heard, in each file heard that
    /// [`WORD_ENDS`] times.
    pub after_word_s: Vec<f64>,
}

/// In a directory of positives, where the word ends in some of them: lines of a file's
/// name, a tab and seconds from its start.
pub const WORD_ENDS: &str = "word-ends.tsv";

/// `bench`: the detection rate over `positives`, the false wakes per hour over
/// `negatives`, and the share of one core the listening takes.
fn bench(
    state_dir: &Path,
    positives: &Path,
    negatives: &Path,
    sensitivity: f32,
) -> anyhow::Result<()> {
    let r = measure(&mut spotter(state_dir, sensitivity)?, positives, negatives)?;
    println!("sensitivity          {sensitivity:.2}");
    println!(
        "detection rate       {:.1} % ({} of {} files)",
        100.0 * r.heard_in as f64 / r.said as f64,
        r.heard_in,
        r.said
    );
    println!(
        "false wakes          {} in {:.2} h of other sound: {:.1} per hour",
        r.false_wakes,
        r.other_s / 3600.0,
        r.false_wakes as f64 / (r.other_s / 3600.0)
    );
    println!(
        "listening cost       {:.1} s for {:.0} s of sound: {:.2} % of one core ({:.0}x real time)",
        r.busy_s,
        r.sound_s,
        100.0 * r.busy_s / r.sound_s,
        r.sound_s / r.busy_s
    );
    let mut after = r.after_word_s;
    if !after.is_empty() {
        after.sort_by(f64::total_cmp);
        let at = |q: f64| after[((after.len() - 1) as f64 * q).round() as usize];
        println!(
            "heard after the word median {:.2} s, 90 % within {:.2} s, at most {:.2} s \
             (of {} files heard whose word's end is known)",
            at(0.5),
            at(0.9),
            at(1.0),
            after.len()
        );
    }
    Ok(())
}

/// Listens to every file in `positives` and `negatives`, each from a fresh start.
pub fn measure(
    spotter: &mut Spotter,
    positives: &Path,
    negatives: &Path,
) -> anyhow::Result<Report> {
    let files = |dir: &Path| -> anyhow::Result<Vec<PathBuf>> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != WORD_ENDS))
            .collect();
        found.sort();
        Ok(found)
    };
    let word_ends = word_ends(positives)?;
    let mut report = Report {
        said: 0,
        heard_in: 0,
        false_wakes: 0,
        other_s: 0.0,
        busy_s: 0.0,
        sound_s: 0.0,
        after_word_s: Vec::new(),
    };
    for (dir, says_it) in [(positives, true), (negatives, false)] {
        for file in files(dir)? {
            let audio = read(&file)?;
            spotter.reset();
            let started = Instant::now();
            let heard = listen(spotter, &audio);
            report.busy_s += started.elapsed().as_secs_f64();
            report.sound_s += seconds(audio.len());
            if says_it {
                report.said += 1;
                report.heard_in += usize::from(!heard.is_empty());
                let name = file.file_name().and_then(|n| n.to_str());
                let word_end = name.and_then(|n| word_ends.get(n));
                if let (Some(end), Some((at, _))) = (word_end, heard.first()) {
                    report.after_word_s.push(at - end);
                }
            } else {
                report.false_wakes += heard.len();
                report.other_s += seconds(audio.len());
            }
        }
    }
    if report.said == 0 || report.other_s == 0.0 {
        anyhow::bail!("the bench needs sound files in both directories");
    }
    Ok(report)
}

/// The [`WORD_ENDS`] of `positives`, if it has one.
fn word_ends(positives: &Path) -> anyhow::Result<HashMap<String, f64>> {
    let path = positives.join(WORD_ENDS);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (name, at) = line
                .split_once('\t')
                .and_then(|(name, at)| Some((name, at.trim().parse::<f64>().ok()?)))
                .with_context(|| {
                    format!("{}: not a name, a tab and seconds: {line}", path.display())
                })?;
            Ok((name.to_owned(), at))
        })
        .collect()
}

#[cfg(all(target_os = "linux", feature = "sound"))]
mod record {
    //! `record`: the takes, from the microphone.
    use std::path::Path;
    use std::time::Duration;

    use anyhow::Context;

    use crate::audio::card::CardSound;
    use crate::audio::DEVICE_RATE;
    use crate::wake_word::{take, wav, TAKES_DIR};

    /// How long each take listens.
    const LISTEN: Duration = Duration::from_millis(2500);
    /// Tries at one take before giving up.
    const TRIES: usize = 4;

    pub fn record(state_dir: &Path, input: &str, count: usize) -> anyhow::Result<()> {
        let mut sound = CardSound::open(Some(input), None, Default::default())?;
        let dir = state_dir.join(TAKES_DIR);
        herald_files::create_private_dir(state_dir)?;
        herald_files::create_private_dir(&dir)?;
        herald_files::remove_files(&dir, |p| p.extension().is_some_and(|e| e == "wav"))?;
        println!(
            "Say the wake word once each time you are asked, as you will say it to the gadget."
        );
        for n in 1..=count {
            let mut tries = 0;
            loop {
                tries += 1;
                println!("take {n} of {count}: say it now");
                let heard = sound.record(LISTEN)?;
                match take(&heard) {
                    Ok(word) => {
                        let path = dir.join(format!("take-{n:02}.wav"));
                        herald_files::write_private(&path, &wav(&word))?;
                        println!(
                            "  kept ({:.2} s)",
                            word.len() as f64 / f64::from(DEVICE_RATE)
                        );
                        break;
                    }
                    Err(why) if tries < TRIES => println!("  again: {why}"),
                    Err(why) => return Err(why).context(format!("take {n}")),
                }
            }
        }
        println!("now make the wake word: herald gadget wake-word train");
        Ok(())
    }
}

#[cfg(not(all(target_os = "linux", feature = "sound")))]
mod record {
    pub fn record(_: &std::path::Path, _: &str, _: usize) -> anyhow::Result<()> {
        anyhow::bail!("{}", crate::NO_SOUND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::speech_end::tests::silence;
    use crate::wake_word::tests::owner;

    fn write(path: &Path, samples: &[i16]) {
        std::fs::write(path, super::super::wav(samples)).unwrap();
    }

    #[test]
    fn a_word_made_from_files_is_kept_and_measured() {
        let state = tempfile::tempdir().unwrap();
        let sounds = tempfile::tempdir().unwrap();
        let mut takes = Vec::new();
        let made = [(140, 45), (150, 50), (160, 55), (170, 48)];
        for (i, (speed, pitch)) in made.iter().enumerate() {
            let path = sounds.path().join(format!("take-{i}.wav"));
            let said = [
                silence(0.5),
                owner(*speed, *pitch, "hey herald"),
                silence(0.5),
            ];
            write(&path, &said.concat());
            takes.push(path);
        }
        make(state.path(), "hey herald", takes).unwrap();
        let model = state.path().join(MODEL_FILE);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&model).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let (positives, negatives) = (sounds.path().join("yes"), sounds.path().join("no"));
        std::fs::create_dir_all(&positives).unwrap();
        std::fs::create_dir_all(&negatives).unwrap();
        let mut word_ends = String::new();
        for (speed, pitch) in [(155, 52), (175, 40)] {
            let (before, word) = (silence(0.5), owner(speed, pitch, "hey herald"));
            // Where the word's sound ends: espeak-ng ends its rendering in quiet.
            let peak = word.iter().map(|s| s.unsigned_abs()).max().unwrap();
            let sounding = word
                .iter()
                .rposition(|s| s.unsigned_abs() > peak / 100)
                .unwrap();
            let word_end = (before.len() + sounding) as f64 / f64::from(DEVICE_RATE);
            let rest = owner(speed, pitch, "Is it going to rain?");
            let said = [before, word, silence(0.3), rest, silence(0.5)].concat();
            let name = format!("{speed}-{pitch}.wav");
            write(&positives.join(&name), &said);
            word_ends += &format!("{name}\t{word_end:.3}\n");
            let other = owner(speed, pitch, "Her aunt held the door for Harold at noon.");
            write(&negatives.join(format!("{speed}-{pitch}.wav")), &other);
        }
        std::fs::write(positives.join(WORD_ENDS), word_ends).unwrap();
        let mut spotter = spotter(state.path(), DEFAULT_SENSITIVITY).unwrap();
        let report = measure(&mut spotter, &positives, &negatives).unwrap();
        assert_eq!((report.said, report.heard_in), (2, 2), "{report:?}");
        assert_eq!(report.false_wakes, 0, "{report:?}");
        assert!(report.busy_s > 0.0 && report.sound_s > report.other_s);
        // Heard as the word ends.
        assert_eq!(report.after_word_s.len(), 2, "{report:?}");
        assert!(
            report.after_word_s.iter().all(|s| (0.0..0.6).contains(s)),
            "{report:?}"
        );
        std::fs::write(positives.join(WORD_ENDS), "155-52.wav 1.2\n").unwrap();
        let err = measure(&mut spotter, &positives, &negatives).unwrap_err();
        assert!(format!("{err:#}").contains(WORD_ENDS), "{err:#}");
        // Without the file nothing is timed, and nothing else changes.
        std::fs::remove_file(positives.join(WORD_ENDS)).unwrap();
        let untimed = measure(&mut spotter, &positives, &negatives).unwrap();
        assert_eq!((untimed.heard_in, untimed.after_word_s.len()), (2, 0));

        // No reference yet: the error says how to make one; a damaged one names its file.
        let empty = tempfile::tempdir().unwrap();
        let err = spotter_error(empty.path());
        assert!(err.contains("wake-word record"), "{err}");
        std::fs::write(empty.path().join(MODEL_FILE), b"\x00\x01 not a reference").unwrap();
        let err = spotter_error(empty.path());
        assert!(err.contains(MODEL_FILE) && err.contains("damaged"), "{err}");
    }

    fn spotter_error(dir: &Path) -> String {
        match spotter(dir, DEFAULT_SENSITIVITY) {
            Ok(_) => panic!("a spotter without a reference"),
            Err(err) => format!("{err:#}"),
        }
    }
}
