//! Firmware updates in the gadget core: the [`Updates`] sub-machine fed with the
//! device's messages, the clock and the shell's results, its messages sent to the
//! device and its effects handed to the shell.
//!
//! [`Updates`]: super::ota::Updates

use std::path::PathBuf;
use std::time::Instant;

use herald_gadget_proto::{limits, DeviceMessage};

use super::core::{Core, Effect};
use super::ota::{Chunk, NotPrepared, OtaOutput, OtaUpdate, Request, StoreFailed};
use crate::CallId;

impl Core {
    /// Send what the updates handed back and queue their effects.
    pub(super) fn drain_ota(&mut self) {
        for output in self.ota.take_output() {
            match output {
                OtaOutput::Send(msg) => self.send(msg),
                OtaOutput::Effect(effect) => self.effect(Effect::Ota(effect)),
            }
        }
    }

    pub(super) fn ota_message(&mut self, msg: &DeviceMessage, now: Instant) {
        if let Some(conn) = &self.conn {
            self.ota.message(&self.device_id, &conn.peer, msg, now);
            self.drain_ota();
        }
    }

    pub(super) fn ota_timeout(&mut self, now: Instant) {
        if let Some(conn) = &self.conn {
            self.ota.timeout(&self.device_id, &conn.peer, now);
            self.drain_ota();
        }
    }

    /// A firmware update request from the admin API.
    pub fn handle_ota_request(&mut self, request: Request) {
        let peer = self.conn.as_ref().map(|c| &c.peer);
        self.ota.request(&self.device_id, peer, request);
        self.drain_ota();
    }

    /// The device's update in the store, as the shell found it.
    pub fn handle_ota_found(&mut self, found: Result<Option<OtaUpdate>, StoreFailed>) {
        if let Some(conn) = &self.conn {
            self.ota.found(&self.device_id, &conn.peer, found);
            self.drain_ota();
        }
    }

    /// The device's key with the staged image open, or why not.
    pub fn handle_ota_prepared(
        &mut self,
        key: Result<[u8; limits::KEY_LEN], NotPrepared>,
        now: Instant,
    ) {
        self.ota.prepared(&self.device_id, key, self.rules.ota, now);
        self.drain_ota();
    }

    /// What the store made of a staged image.
    pub fn handle_ota_staged(
        &mut self,
        file: PathBuf,
        stored: Result<Option<OtaUpdate>, StoreFailed>,
        call: CallId,
    ) {
        let peer = self.conn.as_ref().map(|c| &c.peer);
        self.ota.staged(&self.device_id, peer, file, stored, call);
        self.drain_ota();
    }

    /// The staged image could not be read for the next frame.
    pub fn handle_ota_unreadable(&mut self, err: String) {
        self.ota.unreadable(err);
        self.drain_ota();
    }

    /// Whether a firmware frame may go out once the outbox has room.
    pub fn ota_wants_chunk(&self) -> bool {
        self.conn.is_some() && self.ota.wants_chunk()
    }

    pub fn poll_ota_chunk(&mut self) -> Option<Chunk> {
        self.ota.poll_chunk()
    }

    /// Whether an update is being sent, so its staged copy must stay open.
    pub fn ota_is_running(&self) -> bool {
        self.ota.is_running()
    }
}
