//! Node state, the pure rules (SPEC 4.1-4.3): holding and releasing nodes ([`holders`]:
//! the holders annotation and the cordon; uncordon when the last live holder leaves) and the
//! KEP-5683 Node conditions ([`conditions`]). [`super::maintenance`] decides with them;
//! what is recorded on a Node is read back by [`crate::api::node`].

pub mod conditions;
pub mod holders;
