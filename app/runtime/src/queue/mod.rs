//! What runs on a queue's consumer thread: the one consumer loop ([`consume`]) and the
//! unwrap that turns each burst's packets into what the stages see ([`unwrap`]).

pub(crate) mod consume;
pub(crate) mod unwrap;
