//! The egress stage: a queue's egress sinks ([`EgressSink`]) copy each payload into the heap
//! being filled, as a record sink copies its records (the same stage shape); their sender
//! threads send the heaps downstream.

use crate::egress::EgressSink;

super::record::sink_stage!(EgressSink);
