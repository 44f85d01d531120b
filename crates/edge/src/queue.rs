//! A bounded multi-producer, single-consumer queue that holds memory only for what waits
//! in it: each session's mailbox and each connection's outbox.
//!
//! Almost every connection is idle almost all the time, so what a queue costs empty is
//! what a held gadget costs. tokio's `mpsc` allocates its slots 32 at a time, keeps a
//! second block once it has cycled through the first, and pads its counters to cache
//! lines: some 3 KiB per idle gadget for the two queues (`herald bench connect`
//! measures it). Here the slots are a `VecDeque` that grows with what is queued and is
//! given back whenever the queue empties (an allocation per burst, not per idle
//! connection); a semaphore keeps the bound (fair, and safe to cancel while waiting)
//! and an `AtomicWaker` wakes the one receiver, which can also be polled by hand (a
//! connection's writer polls its outbox beside its socket).
//!
//! The lock is a plain mutex, held only to push or pop one item, never across an await.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::{Notify, Semaphore, TryAcquireError};

/// The queued items, and how many of them were let in past the bound.
struct Items<T> {
    queue: VecDeque<T>,
    /// Items queued by [`Sender::push_over`]: the first this many to leave free no slot.
    over: usize,
}

struct Shared<T> {
    items: Mutex<Items<T>>,
    /// One permit per free slot; closed once nothing will be received any more.
    room: Semaphore,
    /// Wakes the receiver: something was queued, or the last sender left.
    ready: AtomicWaker,
    /// Wakes senders waiting in [`Sender::closed`].
    gone: Notify,
    senders: AtomicUsize,
    /// The receiver closed the queue or went away: sends fail.
    closed: AtomicBool,
}

impl<T> Shared<T> {
    fn items(&self) -> MutexGuard<'_, Items<T>> {
        // A push or a pop cannot leave the deque half-changed, so a poisoned lock is fine.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `value` into a slot already taken from `room`, or past the bound (`over`).
    fn push(&self, value: T, over: bool) -> Result<(), T> {
        {
            let mut items = self.items();
            // Checked under the lock the receiver closes under, so nothing is queued
            // after the receiver has stopped looking.
            if self.closed.load(Ordering::Acquire) {
                return Err(value);
            }
            items.queue.push_back(value);
            items.over += usize::from(over);
        }
        self.ready.wake();
        Ok(())
    }

    fn pop(&self) -> Option<T> {
        let (value, frees_slot) = {
            let mut items = self.items();
            let value = items.queue.pop_front()?;
            if items.queue.is_empty() {
                items.queue = VecDeque::new();
            }
            let frees_slot = items.over == 0;
            items.over = items.over.saturating_sub(1);
            (value, frees_slot)
        };
        if frees_slot {
            self.room.add_permits(1);
        }
        Some(value)
    }
}

/// A queue of at most `capacity` items; see the module docs.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        items: Mutex::new(Items {
            queue: VecDeque::new(),
            over: 0,
        }),
        room: Semaphore::new(capacity),
        ready: AtomicWaker::new(),
        gone: Notify::new(),
        senders: AtomicUsize::new(1),
        closed: AtomicBool::new(false),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// The queue is closed: the value comes back.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed<T>(pub T);

#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    Full(T),
    Closed(T),
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.ready.wake();
        }
    }
}

impl<T> Sender<T> {
    /// Queue `value`, waiting while the queue is full.
    pub async fn send(&self, value: T) -> Result<(), Closed<T>> {
        match self.shared.room.acquire().await {
            Ok(slot) => slot.forget(),
            Err(_) => return Err(Closed(value)),
        }
        self.shared.push(value, false).map_err(Closed)
    }

    /// Queue `value` now, past the bound if the queue is full: for the one sender whose
    /// items must never wait (a session's own frames), which keeps its own limit
    /// ([`Sender::waiting`]). Items queued this way take no slot from the others.
    pub fn push_over(&self, value: T) -> Result<(), Closed<T>> {
        match self.shared.room.try_acquire() {
            Ok(slot) => {
                slot.forget();
                self.shared.push(value, false).map_err(Closed)
            }
            Err(TryAcquireError::NoPermits) => self.shared.push(value, true).map_err(Closed),
            Err(TryAcquireError::Closed) => Err(Closed(value)),
        }
    }

    /// How many items wait.
    pub fn waiting(&self) -> usize {
        self.shared.items().queue.len()
    }

    /// Queue `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        match self.shared.room.try_acquire() {
            Ok(slot) => slot.forget(),
            Err(TryAcquireError::NoPermits) => return Err(TrySendError::Full(value)),
            Err(TryAcquireError::Closed) => return Err(TrySendError::Closed(value)),
        }
        self.shared.push(value, false).map_err(TrySendError::Closed)
    }

    /// A slot for one item, once there is one.
    pub async fn reserve_owned(self) -> Result<Permit<T>, Closed<()>> {
        match self.shared.room.acquire().await {
            Ok(slot) => slot.forget(),
            Err(_) => return Err(Closed(())),
        }
        Ok(Permit { sender: Some(self) })
    }

    /// Done once the receiver has closed the queue or gone away.
    pub async fn closed(&self) {
        loop {
            // Waiting from its creation, so a close between it and the check wakes it.
            let gone = self.shared.gone.notified();
            if self.shared.closed.load(Ordering::Acquire) {
                return;
            }
            gone.await;
        }
    }

    /// No other sender (nor a permit taken with one) exists.
    pub fn is_only_sender(&self) -> bool {
        self.shared.senders.load(Ordering::Acquire) == 1
    }

    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// A slot taken in advance: [`Permit::send`] fills it; dropped unused, it is free again.
pub struct Permit<T> {
    sender: Option<Sender<T>>,
}

impl<T> Permit<T> {
    /// Queue `value` in the slot; the sender comes back, unless the queue closed
    /// meanwhile (the value is dropped then, as the receiver would never see it).
    pub fn send(mut self, value: T) -> Option<Sender<T>> {
        let sender = self.sender.take()?;
        sender.shared.push(value, false).ok().map(|()| sender)
    }
}

impl<T> Drop for Permit<T> {
    fn drop(&mut self) {
        if let Some(sender) = &self.sender {
            sender.shared.room.add_permits(1);
        }
    }
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next item; `None` once the queue is closed (or every sender is gone) and
    /// what was queued before has been received. Safe to cancel: nothing is lost.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`Receiver::recv`], polled: `Pending` wakes `cx` when an item comes or the last
    /// sender leaves.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let shared = &*self.shared;
        if let Some(value) = shared.pop() {
            return Poll::Ready(Some(value));
        }
        // Registered before looking again, so a push between the looks wakes it.
        shared.ready.register(cx.waker());
        if let Some(value) = shared.pop() {
            return Poll::Ready(Some(value));
        }
        if shared.closed.load(Ordering::Acquire) || shared.senders.load(Ordering::Acquire) == 0 {
            // A push may have landed between the look and the check.
            return Poll::Ready(shared.pop());
        }
        Poll::Pending
    }

    /// The next item if one waits now.
    pub fn try_recv(&mut self) -> Option<T> {
        self.shared.pop()
    }

    pub fn is_empty(&self) -> bool {
        self.shared.items().queue.is_empty()
    }

    /// Refuse new items; those already queued can still be received.
    pub fn close(&mut self) {
        {
            let _items = self.shared.items();
            self.shared.closed.store(true, Ordering::Release);
        }
        self.shared.room.close();
        self.shared.gone.notify_waiters();
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.close();
        // What was queued goes now, not when the last sender does.
        let left = std::mem::take(&mut self.shared.items().queue);
        drop(left);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;

    /// Whether a send completes without waiting.
    fn sent_now<T>(tx: &Sender<T>, value: T) -> bool {
        tx.send(value).now_or_never().is_some_and(|r| r.is_ok())
    }

    #[tokio::test]
    async fn items_come_out_in_order_and_the_bound_holds() {
        let (tx, mut rx) = channel(2);
        tx.send(1).await.unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        // A full queue makes the sender wait until the receiver takes one.
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(3).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(rx.recv().await, Some(1));
        waiting.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
    }

    #[tokio::test]
    async fn items_pushed_past_the_bound_keep_their_place_and_take_no_slot() {
        let (tx, mut rx) = channel(2);
        tx.send(1).await.unwrap();
        tx.push_over(2).unwrap();
        tx.push_over(3).unwrap();
        tx.push_over(4).unwrap();
        assert_eq!(tx.waiting(), 4);
        assert!(!sent_now(&tx, 5), "the bound holds for the others");
        // The items past the bound leave first in the count: two out, still full.
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert!(!sent_now(&tx, 5), "the two over the bound freed no slot");
        assert_eq!(rx.recv().await, Some(3));
        assert!(sent_now(&tx, 5), "one slot free again");
        assert_eq!(rx.recv().await, Some(4));
        assert_eq!(rx.recv().await, Some(5));
        assert!(sent_now(&tx, 6) && sent_now(&tx, 7) && !sent_now(&tx, 8));
        rx.close();
        assert_eq!(tx.push_over(9), Err(Closed(9)));
    }

    #[tokio::test]
    async fn the_receiver_wakes_for_a_later_item_and_ends_with_the_last_sender() {
        let (tx, mut rx) = channel(4);
        let receiving = tokio::spawn(async move {
            let first = rx.recv().await;
            let end = rx.recv().await;
            (first, end)
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        tx.send("late").await.unwrap();
        drop(tx);
        assert_eq!(receiving.await.unwrap(), (Some("late"), None));
    }

    #[tokio::test]
    async fn a_closed_queue_refuses_new_items_but_gives_out_the_queued_ones() {
        let (tx, mut rx) = channel(4);
        tx.send(1).await.unwrap();
        let permit = tx.clone().reserve_owned().await.unwrap();
        rx.close();
        assert_eq!(tx.send(2).await, Err(Closed(2)));
        assert_eq!(tx.try_send(3), Err(TrySendError::Closed(3)));
        tokio::time::timeout(Duration::from_secs(5), tx.closed())
            .await
            .unwrap();
        assert!(permit.send(4).is_none());
        assert!(tx.clone().reserve_owned().await.is_err());
        assert_eq!(rx.recv().await, Some(1));
        // Senders remain, yet the closed queue ends.
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_dropped_receiver_fails_waiting_senders_and_frees_the_items() {
        let (tx, rx) = channel(1);
        let item = Arc::new(());
        tx.send(item.clone()).await.unwrap();
        let waiting = tokio::spawn({
            let tx = tx.clone();
            let item = item.clone();
            async move { tx.send(item).await.is_err() }
        });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(waiting.await.unwrap(), "the waiting send failed");
        assert_eq!(Arc::strong_count(&item), 1, "queued items were dropped");
    }

    #[tokio::test]
    async fn an_unused_permit_gives_its_slot_back() {
        let (tx, mut rx) = channel(1);
        let permit = tx.clone().reserve_owned().await.unwrap();
        assert!(!sent_now(&tx, 1), "the reserved slot was taken");
        drop(permit);
        assert!(sent_now(&tx, 2));
        let permit = tx.clone().reserve_owned();
        assert_eq!(rx.recv().await, Some(2));
        let back = permit.await.unwrap().send(3).unwrap();
        assert!(back.same_channel(&tx));
        assert_eq!(rx.recv().await, Some(3));
    }

    #[tokio::test]
    async fn a_drained_burst_gives_its_memory_back() {
        let (tx, mut rx) = channel(64);
        for i in 0..64 {
            tx.send(i).await.unwrap();
        }
        assert!(rx.shared.items().queue.capacity() >= 64);
        for _ in 0..64 {
            rx.recv().await.unwrap();
        }
        assert_eq!(rx.shared.items().queue.capacity(), 0);
        // Partly drained, it keeps its slots for the rest.
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        rx.recv().await.unwrap();
        assert!(rx.shared.items().queue.capacity() > 0);
        rx.recv().await.unwrap();
        assert_eq!(rx.shared.items().queue.capacity(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_senders_lose_nothing() {
        let (tx, mut rx) = channel(8);
        let senders: Vec<_> = (0..8u32)
            .map(|s| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    for i in 0..1000u32 {
                        tx.send((s, i)).await.unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u32; 8];
        while let Some((s, i)) = rx.recv().await {
            // Each sender's items arrive in its order.
            assert_eq!(next[s as usize], i);
            next[s as usize] += 1;
        }
        for sender in senders {
            sender.await.unwrap();
        }
        assert_eq!(next, [1000; 8]);
    }
}
