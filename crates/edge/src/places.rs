//! Places held per source address, for the caps on what strangers may hold at once:
//! connections still upgrading, and first contacts in their handshake. A place is held
//! by an [`AddrPlace`] and given back when it is dropped, however its holder ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
pub struct AddrPlaces {
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One place, given back when dropped.
pub struct AddrPlace {
    places: Arc<AddrPlaces>,
    addr: IpAddr,
}

impl AddrPlaces {
    /// A place for `addr` if `allowed(held here, held in all)` says so.
    pub fn take(
        places: &Arc<AddrPlaces>,
        addr: IpAddr,
        allowed: impl FnOnce(usize, usize) -> bool,
    ) -> Option<AddrPlace> {
        let mut held = places.lock();
        let total: usize = held.values().sum();
        let here = held.get(&addr).copied().unwrap_or(0);
        if !allowed(here, total) {
            return None;
        }
        *held.entry(addr).or_default() += 1;
        Some(AddrPlace {
            places: places.clone(),
            addr,
        })
    }

    #[cfg(test)]
    pub fn addresses(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for AddrPlace {
    fn drop(&mut self) {
        let mut held = self.places.lock();
        if let Some(count) = held.get_mut(&self.addr) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.addr);
            }
        }
    }
}
