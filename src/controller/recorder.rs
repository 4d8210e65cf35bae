//! The Event recorder of a leadership term, renewed once it has been idle for as long as it
//! remembers (docs/reliability.md "Soak"). kube-runtime's `Recorder` keeps every
//! Event it published for 6 minutes (its `CACHE_TTL`) in a map, to publish a repeat as a
//! series; it drops the expired entries on each publish, but the map keeps its capacity
//! (about 1.4 KiB a slot: the 1,000-byte Event and its 440-byte key). A burst (a maintenance
//! over thousands of nodes) would leave its high-water mark resident for the rest of the term.
//! Once nothing was published for 6 minutes every entry has expired, so a fresh recorder
//! forgets nothing.

use super::memory::locked;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long kube-runtime's `Recorder` remembers a published Event (its private `CACHE_TTL`,
/// kube-runtime 5): after that, a repeat is a new Event rather than a series.
pub const RECORDER_MEMORY: Duration = Duration::from_secs(6 * 60);

/// A `Recorder` and when it was last handed out, replaced by a fresh one when idle.
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    current: Mutex<(Recorder, Instant)>,
}

impl EventRecorder {
    /// A recorder that writes with `client` as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        EventRecorder { client, reporter, current: Mutex::new((recorder, Instant::now())) }
    }

    /// The recorder to publish one Event with (a clone sharing its memory); counts as a use.
    pub fn recorder(&self) -> Recorder {
        let mut current = locked(&self.current);
        current.1 = Instant::now();
        current.0.clone()
    }

    /// Replaces the recorder with a fresh one when none was handed out for
    /// [`RECORDER_MEMORY`] before `now`, dropping the old one's map. Returns whether it did.
    /// Called by the janitor's sweep; a publish still in flight on the old clone lands in the
    /// old map, which goes with it.
    pub fn renew_if_idle(&self, now: Instant) -> bool {
        let mut current = locked(&self.current);
        if now.saturating_duration_since(current.1) < RECORDER_MEMORY {
            return false;
        }
        *current = (Recorder::new(self.client.clone(), self.reporter.clone()), now);
        true
    }
}
