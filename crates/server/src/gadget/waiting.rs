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
use std::sync::Mutex;
use std::time::{Duration, Instant};

use herald_gadget_proto::limits;

/// Unpaired devices (enrolled or enrolling) the server keeps in all.
pub(crate) const MAX_WAITING: usize = limits::MAX_PENDING_ENROLLMENTS;
/// … and from one source address.
pub(crate) const MAX_WAITING_PER_ADDR: usize = limits::MAX_PENDING_ENROLLMENTS_PER_ADDR;
/// How long a waiting device keeps its place after its last contact.
pub(crate) const WAITING_TTL: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub(crate) struct WaitingRoom {
    places: Mutex<Places>,
}

#[derive(Default)]
struct Places {
    /// Enrolled devices waiting for approval.
    devices: HashMap<String, Waiter>,
    /// First contacts between `challenge` and `auth`, by address.
    enrolling: HashMap<IpAddr, usize>,
}

struct Waiter {
    addr: IpAddr,
    /// `None` while connected: a connected device is in contact all the time.
    last_contact: Option<Instant>,
}

/// A place held for a first contact until it is enrolled or gives up.
pub(crate) struct Reservation<'a> {
    room: &'a WaitingRoom,
    addr: IpAddr,
}

impl WaitingRoom {
    /// Hold a place for a device the server has never seen, or `None` when the room is
    /// full. Devices whose wait expired are dropped first; their ids are returned so
    /// their records can be forgotten.
    pub(crate) fn reserve(
        &self,
        addr: IpAddr,
        now: Instant,
    ) -> (Option<Reservation<'_>>, Vec<String>) {
        let mut places = self.lock();
        let expired = places.expire(now);
        let total = places.devices.len() + places.enrolling.values().sum::<usize>();
        let here = places.devices.values().filter(|w| w.addr == addr).count()
            + places.enrolling.get(&addr).copied().unwrap_or(0);
        if total >= MAX_WAITING || here >= MAX_WAITING_PER_ADDR {
            return (None, expired);
        }
        *places.enrolling.entry(addr).or_default() += 1;
        (Some(Reservation { room: self, addr }), expired)
    }

    /// A device connected without being paired: it waits (again) from `addr`.
    pub(crate) fn connected(&self, device_id: &str, addr: IpAddr) {
        let waiter = Waiter {
            addr,
            last_contact: None,
        };
        self.lock().devices.insert(device_id.to_owned(), waiter);
    }

    /// A waiting device went away: its hour starts now.
    pub(crate) fn disconnected(&self, device_id: &str, now: Instant) {
        if let Some(waiter) = self.lock().devices.get_mut(device_id) {
            waiter.last_contact = Some(now);
        }
    }

    /// The device was approved or forgotten: it waits no more.
    pub(crate) fn leave(&self, device_id: &str) {
        self.lock().devices.remove(device_id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().devices.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Places> {
        self.places.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Places {
    fn expire(&mut self, now: Instant) -> Vec<String> {
        let stale = |w: &Waiter| {
            w.last_contact
                .is_some_and(|at| now.saturating_duration_since(at) >= WAITING_TTL)
        };
        let expired: Vec<String> = self
            .devices
            .iter()
            .filter(|(_, w)| stale(w))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            self.devices.remove(id);
        }
        expired
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut places = self.room.lock();
        if let Some(count) = places.enrolling.get_mut(&self.addr) {
            *count -= 1;
            if *count == 0 {
                places.enrolling.remove(&self.addr);
            }
        }
    }
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
