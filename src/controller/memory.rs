//! The one policy for the controller's in-memory state behind a lock: a poisoned lock is
//! taken over as it is. Every such memory holds plain data (sets and maps of names, UIDs and
//! instants) that a panicking holder cannot leave half-built in a way that matters, and each
//! is bounded and swept ([`super::janitor`] lists them). Dropping a record instead would
//! lose exactly what it exists for: a hold in flight forgotten lets a budget of one give two
//! nodes away.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking a poisoned lock over as it is.
pub fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
