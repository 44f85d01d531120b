//! [`Gpio`] on the kernel's GPIO character device (`/dev/gpiochipN`, uAPI v2), through
//! the pure-Rust `gpiocdev` crate.
//!
//! One request holds every line the gadget uses, so another program cannot take one
//! while the service runs and the kernel releases them all when it stops. Buttons are
//! inputs with both edges reported and the pull-up (or pull-down) enabled; the LED and
//! the outputs are outputs, requested at their "off" level. Levels are electrical: the
//! mapping to pressed or on is the caller's ([`super::Buttons`], [`super::Outputs`]).
//!
//! Edges are read on a thread of their own (the reads block) and handed to the service
//! through a bounded channel, which the thread waits on when it is full.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gpiocdev::line::{Bias, EdgeDetection, EdgeKind, Value};
use gpiocdev::Request;
use tokio::sync::mpsc;

use super::{Gpio, GpioError, RawEdge};

/// How often the edge thread looks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(200);

/// The requested lines.
#[derive(Clone)]
pub struct Cdev {
    request: Arc<Request>,
}

/// Stops the edge thread when dropped.
pub struct EdgeThread {
    stop: Arc<AtomicBool>,
}

impl Drop for EdgeThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Requests `inputs` (pulled up when `pull_up`, else down) and `outputs` (each at its
/// level), and starts sending the inputs' edges to `edges`, timed from `origin`.
pub fn open(
    chip: &Path,
    inputs: &[u32],
    pull_up: bool,
    outputs: &[(u32, bool)],
    origin: std::time::Instant,
    edges: mpsc::Sender<RawEdge>,
) -> Result<(Cdev, EdgeThread), GpioError> {
    let open_error = |e: gpiocdev::Error| GpioError::Open {
        chip: chip.display().to_string(),
        message: e.to_string(),
    };
    let mut builder = Request::builder();
    builder.on_chip(chip).with_consumer("herald-gadget");
    if !inputs.is_empty() {
        builder
            .with_lines(inputs)
            .as_input()
            .with_bias(if pull_up {
                Bias::PullUp
            } else {
                Bias::PullDown
            })
            .with_edge_detection(EdgeDetection::BothEdges);
    }
    for (line, level) in outputs {
        builder.with_line(*line).as_output(Value::from(*level));
    }
    let request = Arc::new(builder.request().map_err(open_error)?);
    let stop = Arc::new(AtomicBool::new(false));
    if !inputs.is_empty() {
        let (request, stop) = (request.clone(), stop.clone());
        std::thread::Builder::new()
            .name("gpio-edges".to_owned())
            .spawn(move || read_edges(&request, &stop, origin, &edges))
            .map_err(|e| GpioError::Open {
                chip: chip.display().to_string(),
                message: e.to_string(),
            })?;
    }
    Ok((Cdev { request }, EdgeThread { stop }))
}

fn read_edges(
    request: &Request,
    stop: &AtomicBool,
    origin: std::time::Instant,
    edges: &mpsc::Sender<RawEdge>,
) {
    while !stop.load(Ordering::Relaxed) {
        match request.wait_edge_event(STOP_POLL) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => {
                tracing::error!("GPIO edges cannot be read: {e}");
                return;
            }
        }
        let event = match request.read_edge_event() {
            Ok(event) => event,
            Err(e) => {
                tracing::error!("GPIO edge cannot be read: {e}");
                return;
            }
        };
        let edge = RawEdge {
            line: event.offset,
            high: event.kind == EdgeKind::Rising,
            at: origin.elapsed(),
        };
        // Waits while the channel is full (losing no edge); fails once the service is gone.
        if edges.blocking_send(edge).is_err() {
            return;
        }
    }
}

impl Gpio for Cdev {
    fn set(&mut self, line: u32, high: bool) -> Result<(), GpioError> {
        self.request
            .set_value(line, Value::from(high))
            .map_err(|e| GpioError::Line {
                line,
                message: e.to_string(),
            })
    }
}
