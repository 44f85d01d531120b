//! A fake host and a rig that drives a [`Device`] on a fake clock, playing the server.
#![allow(dead_code)] // each test file uses its own part of the rig

use herald_device::{Action, Boot, Device, DeviceConfig, Event, FlashError, Host, Instant, Screen};
use herald_gadget_proto::{DeviceMessage, ServerMessage};

/// The spec's key: bytes 0x00..0x1f, id `hg-630dcd2966c43366`.
pub const KEY: [u8; 32] = {
    let mut k = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        k[i] = i as u8;
        i += 1;
    }
    k
};
pub const ID: &str = "hg-630dcd2966c43366";

/// Deterministic randomness and an in-memory update partition.
#[derive(Debug, Default)]
pub struct FakeHost {
    next_random: u8,
    pub flash: Vec<u8>,
    pub begun: Option<u64>,
    pub installed: bool,
    pub aborts: u32,
    pub fail_begin: bool,
    pub fail_write: bool,
    pub finish_error: Option<FlashError>,
}

impl Host for FakeHost {
    fn fill_random(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.next_random = self.next_random.wrapping_add(1);
            *b = self.next_random;
        }
    }

    fn ota_begin(&mut self, size: u64) -> Result<(), FlashError> {
        if self.fail_begin {
            return Err(FlashError::Io);
        }
        self.flash.clear();
        self.begun = Some(size);
        Ok(())
    }

    fn ota_write(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        assert!(self.begun.is_some(), "write before begin");
        if self.fail_write {
            return Err(FlashError::Io);
        }
        self.flash.extend_from_slice(bytes);
        Ok(())
    }

    fn ota_finish(&mut self) -> Result<(), FlashError> {
        assert!(self.begun.take().is_some(), "finish before begin");
        match self.finish_error {
            Some(e) => Err(e),
            None => {
                self.installed = true;
                Ok(())
            }
        }
    }

    fn ota_abort(&mut self) {
        assert!(self.begun.take().is_some(), "abort without begin");
        self.aborts += 1;
    }
}

/// A device, its clock, and every action it produced since the last [`Rig::take`].
pub struct Rig {
    pub dev: Device<FakeHost>,
    pub now: u64,
    out: Vec<Action>,
}

impl Rig {
    /// The reference board with the spec key, booted at t = 0.
    pub fn new() -> Rig {
        Rig::with_config(DeviceConfig::reference("Kitchen Gadget"))
    }

    /// A board of this profile with the spec key, booted at t = 0.
    pub fn with_config(config: DeviceConfig) -> Rig {
        Rig::with(
            config,
            Boot {
                key: Some(KEY),
                probation: false,
            },
        )
    }

    /// The reference board on its first boot after an update.
    pub fn on_probation() -> Rig {
        Rig::with(
            DeviceConfig::reference("Kitchen Gadget"),
            Boot {
                key: Some(KEY),
                probation: true,
            },
        )
    }

    pub fn with(config: DeviceConfig, boot: Boot) -> Rig {
        let dev = Device::new(config, boot, FakeHost::default(), Instant::from_millis(0));
        let mut rig = Rig {
            dev,
            now: 0,
            out: Vec::new(),
        };
        rig.collect();
        rig
    }

    /// A rig that is online and paired, with nothing in its output. The heartbeat is the
    /// longest, 300 s, so minutes pass without the connection going stale.
    pub fn online() -> Rig {
        let mut rig = Rig::new();
        rig.connect_and_welcome(true, 300);
        rig.take();
        rig
    }

    fn collect(&mut self) {
        while let Some(a) = self.dev.poll_action() {
            self.out.push(a);
        }
    }

    /// Every action since the last call.
    pub fn take(&mut self) -> Vec<Action> {
        self.collect();
        std::mem::take(&mut self.out)
    }

    /// The messages sent since the last [`Rig::take`], leaving the other actions.
    pub fn sent(&mut self) -> Vec<DeviceMessage> {
        self.collect();
        let mut sent = Vec::new();
        self.out.retain(|a| match a {
            Action::Send(m) => {
                sent.push(m.clone());
                false
            }
            _ => true,
        });
        sent
    }

    /// The type names of [`Rig::sent`].
    pub fn sent_types(&mut self) -> Vec<String> {
        self.sent()
            .iter()
            .map(|m| m.type_name().to_owned())
            .collect()
    }

    /// Lets `ms` pass, running every deadline on the way at its exact time.
    pub fn advance(&mut self, ms: u64) {
        self.advance_to(self.now + ms);
    }

    pub fn advance_to(&mut self, target: u64) {
        for _ in 0..1_000_000 {
            match self.dev.next_deadline() {
                Some(d) if d.as_millis() <= target => {
                    self.now = self.now.max(d.as_millis());
                    self.dev.handle_timeout(Instant::from_millis(self.now));
                    self.collect();
                }
                _ => {
                    self.now = self.now.max(target);
                    return;
                }
            }
        }
        panic!("a deadline that never clears");
    }

    pub fn event(&mut self, event: Event<'_>) {
        self.dev.handle(event, Instant::from_millis(self.now));
        self.collect();
    }

    /// The connection drops without the device asking.
    pub fn drop_connection(&mut self) {
        self.event(Event::Closed {
            code: Some(1006),
            reason: "",
        });
    }

    /// Milliseconds until the next deadline.
    pub fn next_in(&self) -> u64 {
        self.dev.next_deadline().expect("a deadline").as_millis() - self.now
    }

    pub fn server(&mut self, msg: impl Into<ServerMessage>) {
        let text = msg.into().encode();
        self.event(Event::Text(&text));
    }

    pub fn server_json(&mut self, json: &str) {
        self.event(Event::Text(json));
    }

    pub fn binary(&mut self, bytes: &[u8]) {
        self.event(Event::Binary(bytes));
    }

    pub fn down(&mut self, b: herald_device::Button) {
        self.event(Event::ButtonDown(b));
    }

    pub fn up(&mut self, b: herald_device::Button) {
        self.event(Event::ButtonUp(b));
    }

    /// Runs boot to the welcome: the first deadline starts connecting, the socket opens,
    /// the server challenges (enrolled) and welcomes.
    pub fn connect_and_welcome(&mut self, paired: bool, heartbeat_s: u32) {
        self.advance(0);
        assert!(self.take().contains(&Action::Connect), "boot connects");
        self.handshake(paired, heartbeat_s);
    }

    /// From an open `Connect` to online.
    pub fn handshake(&mut self, paired: bool, heartbeat_s: u32) {
        self.event(Event::Connected);
        self.server_json(
            r#"{"type":"challenge","nonce":"bm9uY2Utbm9uY2Utbm9uY2U=","enrolled":true}"#,
        );
        self.server_json(&format!(
            r#"{{"type":"welcome","session":"3f2a9c1b7d4e","paired":{paired},"heartbeat_s":{heartbeat_s},"server":"herald","proto":1}}"#
        ));
    }

    pub fn screen(&self) -> Screen {
        self.dev.screen()
    }

    pub fn lines(&self) -> Vec<String> {
        self.dev.view().lines
    }

    pub fn notice(&self) -> Option<String> {
        self.dev.view().notice.map(str::to_owned)
    }
}
