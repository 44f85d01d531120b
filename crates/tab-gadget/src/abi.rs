//! What the page calls: plain functions of numbers over the module's memory, so the page
//! needs no generated glue (web/src/gadget/core.ts is the other side).
//!
//! Data crosses through three buffers the module owns: the page asks [`herald_input`]
//! for room and writes its text or bytes there before a call; a call that answers writes
//! its JSON to the output and returns its length; an action's or a view's bulk (a frame,
//! samples, pixels) is in the bulk buffer. Times are the page's monotonic clock in
//! milliseconds. One device per module instance.
//!
//! Unsafe code is allowed here alone: exporting unmangled names, and the one import, the
//! page's `crypto.getRandomValues`.
#![allow(unsafe_code)]

use std::cell::RefCell;

use herald_device::{Event, Instant};

use crate::{board_json, Tab};

#[link(wasm_import_module = "herald")]
extern "C" {
    /// Fill `len` bytes at `ptr` with secure random bytes.
    fn random(ptr: *mut u8, len: usize);
}

fn page_random(buf: &mut [u8]) {
    // SAFETY: the page writes exactly `buf.len()` bytes at `buf`'s address, which is
    // this module's memory, borrowed mutably for the call.
    unsafe { random(buf.as_mut_ptr(), buf.len()) }
}

#[derive(Default)]
struct Module {
    tab: Option<Tab>,
    input: Vec<u8>,
    output: Vec<u8>,
    bulk: Vec<u8>,
}

thread_local! {
    static MODULE: RefCell<Module> = RefCell::default();
}

fn with<T>(f: impl FnOnce(&mut Module) -> T) -> T {
    MODULE.with(|module| f(&mut module.borrow_mut()))
}

fn time(ms: f64) -> Instant {
    // The page's clock starts at 0 and only grows; a negative or NaN time reads as 0.
    Instant::from_millis(ms.max(0.0) as u64)
}

/// The input as text; the page writes UTF-8, so anything else reads as nothing.
fn text(input: &[u8]) -> &str {
    std::str::from_utf8(input).unwrap_or_default()
}

impl Module {
    /// Answer with `text`; its length.
    fn answer(&mut self, text: &str) -> usize {
        self.output.clear();
        self.output.extend_from_slice(text.as_bytes());
        self.output.len()
    }

    /// The device, with the input; nothing before `herald_boot`.
    fn run<T: Default>(&mut self, f: impl FnOnce(&mut Tab, &[u8]) -> T) -> T {
        match &mut self.tab {
            Some(tab) => f(tab, &self.input),
            None => T::default(),
        }
    }
}

/// Room for `len` bytes of input; where to write them.
#[no_mangle]
pub extern "C" fn herald_input(len: usize) -> *mut u8 {
    with(|m| {
        m.input.clear();
        m.input.resize(len, 0);
        m.input.as_mut_ptr()
    })
}

/// Where the last answer is.
#[no_mangle]
pub extern "C" fn herald_output() -> *const u8 {
    with(|m| m.output.as_ptr())
}

/// Where the last action's or view's bulk is.
#[no_mangle]
pub extern "C" fn herald_bulk() -> *const u8 {
    with(|m| m.bulk.as_ptr())
}

#[no_mangle]
pub extern "C" fn herald_bulk_len() -> usize {
    with(|m| m.bulk.len())
}

/// The board, as JSON.
#[no_mangle]
pub extern "C" fn herald_board() -> usize {
    with(|m| m.answer(&board_json().to_string()))
}

/// Boot from the settings in the input (see [`Tab::boot`]): answers `{"device_id"}`,
/// or `{"error"}` and no device.
#[no_mangle]
pub extern "C" fn herald_boot(now: f64) -> usize {
    with(|m| {
        let booted = Tab::boot(text(&m.input), page_random, time(now));
        let answer = match &booted {
            Ok(tab) => serde_json::json!({"device_id": tab.device().identity().device_id()}),
            Err(err) => serde_json::json!({"error": err.to_string()}),
        };
        m.tab = booted.ok();
        m.answer(&answer.to_string())
    })
}

/// The WebSocket the device asked for is open.
#[no_mangle]
pub extern "C" fn herald_connected(now: f64) {
    with(|m| m.run(|tab, _| tab.handle(Event::Connected, time(now))));
}

/// The connection ended without the device asking: `code` (negative for none) and the
/// reason in the input.
#[no_mangle]
pub extern "C" fn herald_closed(code: i32, now: f64) {
    with(|m| {
        m.run(|tab, input| {
            let code = u16::try_from(code).ok();
            let reason = text(input);
            tab.handle(Event::Closed { code, reason }, time(now));
        })
    });
}

/// A text frame, in the input. A frame that is not UTF-8 ends the connection in the
/// browser before it gets here.
#[no_mangle]
pub extern "C" fn herald_text(now: f64) {
    with(|m| {
        m.run(|tab, input| {
            tab.handle(Event::Text(text(input)), time(now));
        })
    });
}

/// A binary frame, in the input.
#[no_mangle]
pub extern "C" fn herald_binary(now: f64) {
    with(|m| m.run(|tab, input| tab.handle(Event::Binary(input), time(now))));
}

/// Microphone samples, PCM16 little-endian, in the input.
#[no_mangle]
pub extern "C" fn herald_mic(now: f64) {
    with(|m| {
        m.run(|tab, input| {
            let samples: Vec<i16> = input
                .chunks_exact(2)
                .map(|pair| i16::from_le_bytes([pair[0], pair[1]]))
                .collect();
            tab.handle(Event::MicSamples(&samples), time(now));
        })
    });
}

/// The button named in the input went down (`down` 1) or up (0); 0 for a name the board
/// does not have.
#[no_mangle]
pub extern "C" fn herald_button(down: u32, now: f64) -> u32 {
    with(|m| m.run(|tab, input| u32::from(tab.button(text(input), down != 0, time(now)))))
}

/// The deadline from [`herald_deadline`] came.
#[no_mangle]
pub extern "C" fn herald_timeout(now: f64) {
    with(|m| m.run(|tab, _| tab.timeout(time(now))));
}

/// When to call [`herald_timeout`] next; negative for never.
#[no_mangle]
pub extern "C" fn herald_deadline() -> f64 {
    with(|m| {
        let deadline = m.tab.as_ref().and_then(Tab::next_deadline);
        deadline.map_or(-1.0, |at| at.as_millis() as f64)
    })
}

/// The next action as JSON (its bulk in the bulk buffer); 0 when there is none.
#[no_mangle]
pub extern "C" fn herald_action() -> usize {
    with(|m| {
        let Module { tab, bulk, .. } = m;
        let action = tab.as_mut().and_then(|tab| tab.next_action(bulk));
        match action {
            Some(action) => m.answer(&action.to_string()),
            None => 0,
        }
    })
}

/// The screen and the state around it, as JSON (a picture's pixels in the bulk buffer).
#[no_mangle]
pub extern "C" fn herald_view() -> usize {
    with(|m| {
        let Module { tab, bulk, .. } = m;
        let view = tab.as_ref().map(|tab| tab.view(bulk).to_string());
        m.answer(&view.unwrap_or_default())
    })
}

/// Type the text in the input to the agent: answers why not, or nothing.
#[no_mangle]
pub extern "C" fn herald_send_text(now: f64) -> usize {
    with(|m| {
        let refused = m.run(|tab, input| tab.send_text(text(input), time(now)).err());
        m.answer(&refused.unwrap_or_default())
    })
}

/// Add the action whose spec is in the input: answers why not, or nothing.
#[no_mangle]
pub extern "C" fn herald_register_action() -> usize {
    with(|m| {
        let refused = m.run(|tab, input| tab.register_action(text(input)).err());
        m.answer(&refused.unwrap_or_default())
    })
}

/// Answer an invoked action (see [`Tab::complete_action`]): answers why not, or
/// nothing.
#[no_mangle]
pub extern "C" fn herald_complete_action() -> usize {
    with(|m| {
        let refused = m.run(|tab, input| tab.complete_action(text(input)).err());
        m.answer(&refused.unwrap_or_default())
    })
}
