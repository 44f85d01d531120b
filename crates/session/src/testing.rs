//! A core in a test: calls get ids, answers are kept by id apart from the other
//! effects, and frames read as JSON.

use std::ops::{Deref, DerefMut};
use std::time::Instant;

use herald_port::{Request, RequestError, Response};
use serde_json::{json, Value};

use crate::io::{Frame, Transmit};
use crate::CallId;

/// What an effect is to a test.
pub(crate) enum Sorted<E> {
    Answer(CallId, Result<Response, RequestError>),
    /// Bookkeeping for the shell (metrics) that no test looks at.
    Ignored,
    Other(E),
}

/// A session core as the rig drives it.
pub(crate) trait Driven {
    type Effect;
    fn next_effect(&mut self) -> Option<Self::Effect>;
    fn next_transmit(&mut self) -> Option<Transmit>;
    fn call(&mut self, call: CallId, request: Request, now: Instant);
    fn sort(effect: Self::Effect) -> Sorted<Self::Effect>;
}

/// [`Driven`] for a core whose effects include `Answer { call, answer }` and `Count(_)`
/// (both do: the macro keeps their tests from spelling it out twice).
macro_rules! driven {
    ($core:ty, $effect:ty) => {
        impl $crate::testing::Driven for $core {
            type Effect = $effect;
            fn next_effect(&mut self) -> Option<$effect> {
                $crate::SessionCore::poll_effect(self)
            }
            fn next_transmit(&mut self) -> Option<$crate::io::Transmit> {
                $crate::SessionCore::poll_transmit(self)
            }
            fn call(
                &mut self,
                call: $crate::CallId,
                request: herald_port::Request,
                now: std::time::Instant,
            ) {
                self.handle_call(call, request, now);
            }
            fn sort(effect: $effect) -> $crate::testing::Sorted<$effect> {
                use $crate::testing::Sorted;
                type E = $effect;
                match effect {
                    E::Answer { call, answer } => Sorted::Answer(call, answer),
                    E::Count(_) => Sorted::Ignored,
                    other => Sorted::Other(other),
                }
            }
        }
    };
}
pub(crate) use driven;

pub(crate) struct Rig<C: Driven> {
    core: C,
    calls: u64,
    effects: Vec<C::Effect>,
    answers: Vec<(CallId, Result<Response, RequestError>)>,
}

impl<C: Driven> Deref for Rig<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.core
    }
}

impl<C: Driven> DerefMut for Rig<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.core
    }
}

impl<C: Driven> Rig<C> {
    pub(crate) fn new(core: C) -> Self {
        Rig {
            core,
            calls: 0,
            effects: Vec::new(),
            answers: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(effect) = self.core.next_effect() {
            match C::sort(effect) {
                Sorted::Answer(call, answer) => self.answers.push((call, answer)),
                Sorted::Ignored => {}
                Sorted::Other(effect) => self.effects.push(effect),
            }
        }
    }

    /// The effects since the last look, answers to calls aside.
    pub(crate) fn effects(&mut self) -> Vec<C::Effect> {
        self.drain();
        std::mem::take(&mut self.effects)
    }

    /// Hand `request` to the core as a new call.
    pub(crate) fn call(&mut self, request: Request, now: Instant) -> CallId {
        self.calls += 1;
        let call = CallId(self.calls);
        self.core.call(call, request, now);
        call
    }

    /// The answer to `call`, if the core gave it.
    pub(crate) fn answer(&mut self, call: CallId) -> Option<Result<Response, RequestError>> {
        self.drain();
        let at = self.answers.iter().position(|(id, _)| *id == call)?;
        Some(self.answers.remove(at).1)
    }

    /// Hand `request` to the core and take the answer it gave at once.
    pub(crate) fn ask(&mut self, request: Request, now: Instant) -> Result<Response, RequestError> {
        let call = self.call(request, now);
        self.answer(call).expect("answered at once")
    }

    /// The frames handed back since the last look, as JSON; a close is
    /// `{"close": reason, "conn": id}`, a ping `{"ping": id}`.
    pub(crate) fn sent(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.core.next_transmit())
            .map(|t| match t.frame {
                Frame::Text(text) => serde_json::from_str(&text).unwrap(),
                Frame::Close(_, reason) => json!({"close": reason, "conn": t.conn}),
                Frame::Ping => json!({"ping": t.conn}),
            })
            .collect()
    }
}

/// Where a test's clock starts; the core only ever adds to it.
#[allow(clippy::disallowed_methods)]
pub(crate) fn start() -> Instant {
    Instant::now()
}
