//! The waiting room: devices that are not paired yet, in all and per source address.
//!
//! A device that nobody has approved costs a record and a session, and anyone on the
//! network can make up new ones, so their number is capped as the gadget spec's `busy`
//! means: at most [`MAX_WAITING`] in all and [`MAX_WAITING_PER_ADDR`] from one address,
//! counting first contacts still in their handshake. A waiting device that has not been
//! heard from for [`WAITING_TTL`] gives its place up and its record is forgotten, so a
//! device given away or reset leaves nothing behind. Approval ends the wait.
//!
//! Kept in memory: after a restart the room fills again as devices connect, and
//! devices enrolled before it count once they do.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_gadget_proto::limits;

use crate::places::{AddrPlace, AddrPlaces};

/// Unpaired devices (enrolled or enrolling) the server keeps in all.
pub(crate) const MAX_WAITING: usize = limits::MAX_PENDING_ENROLLMENTS;
/// … and from one source address.
pub(crate) const MAX_WAITING_PER_ADDR: usize = limits::MAX_PENDING_ENROLLMENTS_PER_ADDR;
/// How long a waiting device keeps its place after its last contact.
pub(crate) const WAITING_TTL: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub(crate) struct WaitingRoom {
    /// Enrolled devices waiting for approval. Locked before `enrolling`.
    devices: Mutex<HashMap<String, Waiter>>,
    /// First contacts between `challenge` and `auth`.
    enrolling: Arc<AddrPlaces>,
}

struct Waiter {
    addr: IpAddr,
    /// `None` while connected: a connected device is in contact all the time.
    last_contact: Option<Instant>,
}

impl WaitingRoom {
    /// Hold a place for a device the server has never seen, or `None` when the room is
    /// full. Devices whose wait expired are dropped first; their ids are returned so
    /// their records can be forgotten.
    pub(crate) fn reserve(&self, addr: IpAddr, now: Instant) -> (Option<AddrPlace>, Vec<String>) {
        let mut devices = self.lock();
        let expired = expire(&mut devices, now);
        let waiting = devices.len();
        let waiting_here = devices.values().filter(|w| w.addr == addr).count();
        // Under the devices' lock, so a device cannot start waiting in between.
        let place = AddrPlaces::take(&self.enrolling, addr, |enrolling_here, enrolling| {
            waiting + enrolling < MAX_WAITING
                && waiting_here + enrolling_here < MAX_WAITING_PER_ADDR
        });
        (place, expired)
    }

    /// A device connected without being paired: it waits (again) from `addr`.
    pub(crate) fn connected(&self, device_id: &str, addr: IpAddr) {
        let waiter = Waiter {
            addr,
            last_contact: None,
        };
        self.lock().insert(device_id.to_owned(), waiter);
    }

    /// A waiting device went away: its hour starts now.
    pub(crate) fn disconnected(&self, device_id: &str, now: Instant) {
        if let Some(waiter) = self.lock().get_mut(device_id) {
            waiter.last_contact = Some(now);
        }
    }

    /// The device was approved or forgotten: it waits no more.
    pub(crate) fn leave(&self, device_id: &str) {
        self.lock().remove(device_id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drop the devices whose wait expired; their ids.
fn expire(devices: &mut HashMap<String, Waiter>, now: Instant) -> Vec<String> {
    let stale = |w: &Waiter| {
        w.last_contact
            .is_some_and(|at| now.saturating_duration_since(at) >= WAITING_TTL)
    };
    let expired: Vec<String> = devices
        .iter()
        .filter(|(_, w)| stale(w))
        .map(|(id, _)| id.clone())
        .collect();
    for id in &expired {
        devices.remove(id);
    }
    expired
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 3, last])
    }

    #[test]
    fn four_per_address_and_sixteen_in_all_counting_handshakes_in_progress() {
        let room = WaitingRoom::default();
        let now = Instant::now();
        for i in 0..3 {
            room.connected(&format!("hg-{i}"), addr(1));
        }
        let (held, _) = room.reserve(addr(1), now);
        assert!(held.is_some(), "the fourth from one address");
        assert!(room.reserve(addr(1), now).0.is_none(), "a fifth is refused");
        drop(held);
        assert!(
            room.reserve(addr(1), now).0.is_some(),
            "a failed handshake frees it"
        );

        for i in 3..16 {
            room.connected(&format!("hg-{i}"), addr(i as u8));
        }
        assert_eq!(room.len(), 16);
        assert!(
            room.reserve(addr(200), now).0.is_none(),
            "sixteen wait in all"
        );
        room.leave("hg-5");
        assert!(
            room.reserve(addr(200), now).0.is_some(),
            "approval frees a place"
        );
    }

    #[test]
    fn a_place_expires_an_hour_after_the_last_contact_not_while_connected() {
        let room = WaitingRoom::default();
        let start = Instant::now();
        for i in 0..4 {
            room.connected(&format!("hg-{i}"), addr(1));
        }
        room.disconnected("hg-0", start);
        room.disconnected("hg-1", start + Duration::from_secs(1800));
        // hg-2 and hg-3 stay connected for hours.
        let (held, expired) = room.reserve(addr(1), start + WAITING_TTL - Duration::from_secs(1));
        assert!(held.is_none() && expired.is_empty());
        let (held, expired) = room.reserve(addr(1), start + WAITING_TTL);
        assert!(held.is_some());
        assert_eq!(expired, ["hg-0"]);
        drop(held);
        let (_, expired) = room.reserve(addr(1), start + 10 * WAITING_TTL);
        assert_eq!(expired, ["hg-1"], "connected devices never expire");
        assert_eq!(room.len(), 2);
    }

    #[test]
    fn a_device_that_reconnects_waits_from_its_new_address() {
        let room = WaitingRoom::default();
        let now = Instant::now();
        for i in 0..4 {
            room.connected(&format!("hg-{i}"), addr(1));
        }
        room.disconnected("hg-0", now);
        room.connected("hg-0", addr(2));
        assert!(
            room.reserve(addr(1), now).0.is_some(),
            "one place left at the first address"
        );
        assert_eq!(room.len(), 4);
    }
}
