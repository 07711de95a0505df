//! Classic BPF: a small assembler ([`Asm`] → [`Program`]) and the flow-rule compiler
//! ([`compile_rx_filter`]) that turns an interface's
//! [`FlowTable`](rtdaq_core::flow::FlowTable) into one socket filter per RX queue.
//!
//! Why classic BPF: `SO_ATTACH_FILTER` needs no BPF syscall, no map, no verifier beyond the
//! classic checker, runs on every kernel the engine supports, and is locked with
//! `SO_LOCK_FILTER`. The programs are small (a prologue of about 80 instructions, 3–15 per
//! rule field, about 110 for an RSS body) and jump only forward.
//!
//! The steering design (which queue accepts which frame, the catch-all queue, RSS computed
//! in the filter with the same symmetric Toeplitz hash as the core table) is described in
//! [`compile_rx_filter`]'s module, and in `docs/engines/afpacket.md`.
//!
//! ```
//! use rtdaq_core::flow::{DefaultAction, FlowAction, FlowMatch, FlowRule, FlowTable, PortRange};
//! use rtdaq_core::wire::{emit_udp_frame, UdpFrameSpec};
//! use rtdaq_core::{FlowId, QueueId};
//! use rtdaq_engine_afpacket::bpf::{compile_rx_filter, ACCEPT};
//!
//! let mut table: FlowTable<4> = FlowTable::new(DefaultAction::Queue(QueueId(0)));
//! let to_q1 = FlowMatch { udp_dst: Some(PortRange::single(5001)), ..FlowMatch::ANY };
//! table.push(FlowRule { id: FlowId(7), matcher: to_q1, action: FlowAction::Queue(QueueId(1)) }).unwrap();
//! let q0 = compile_rx_filter(&table, QueueId(0), QueueId(0)).unwrap();
//! let q1 = compile_rx_filter(&table, QueueId(1), QueueId(0)).unwrap();
//!
//! let mut frame = [0u8; 128];
//! let n = emit_udp_frame(&mut frame, &UdpFrameSpec { dst_port: 5001, payload_len: 16, ..Default::default() }).unwrap();
//! assert_eq!((q0.run(&frame[..n], None), q1.run(&frame[..n], None)), (0, ACCEPT));
//! ```

mod asm;
mod compile;

pub use asm::{op, Asm, AsmError, Aux, Insn, Label, Program, Size, Target, VlanAux, MAX_INSNS};
pub use compile::{compile_rx_filter, ACCEPT};
