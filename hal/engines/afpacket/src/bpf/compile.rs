//! The flow-rule compiler: one classic BPF program per RX queue that accepts exactly the
//! frames that queue must receive, so the queues of one interface partition its traffic.
//!
//! ## What a queue's program accepts
//! The program runs the interface's rules in order, like
//! [`FlowTable::classify`](rtdaq_core::flow::FlowTable::classify), and stops at the first
//! rule that matches:
//!
//! | first matching rule | accepted by |
//! |---|---|
//! | `queue = t` | queue `t` |
//! | `rss = [q0, q1, ...]` | `qs[h % n]`, `h` the symmetric Toeplitz hash of the IPv4/UDP 4-tuple (the same hash and index as the core table; frames that are not unfragmented IPv4/UDP: `q0`) |
//! | `drop = true` | the *catch-all* queue |
//! | none | the *catch-all* queue |
//! | (frame too short for its L2 header) | the *catch-all* queue |
//!
//! The catch-all queue is the interface's `default_action` queue, or queue 0 when the default
//! action is "drop": it receives what no rule claims so that its `FlowTable` counts it
//! (`no_flow`, `flow_drop`, `malformed`) instead of the frame vanishing in the kernel. Every
//! queue's program evaluates the same rules on the same fields, so each frame is accepted by
//! exactly one queue.
//!
//! ## Header parsing (prologue)
//! The prologue parses once and keeps the fields in scratch memory (`M[]`):
//! the outer VLAN id (from the kernel's stripped tag, `SKF_AD_VLAN_TAG`, or from the frame),
//! an inner 802.1Q tag, the EtherType after the tags, the IPv4 header offset, the L4 offset
//! (`IHL × 4`), whether an unfragmented UDP header is there, the UDP payload length, the eCPRI
//! message type, and the length of the frame **as delivered** (with a stripped tag put back,
//! which is what user space sees and what frame-relative `word` offsets count from). Every
//! packet load is preceded by a length check, because a load past the end makes the kernel
//! drop the frame silently.
//!
//! ## Field semantics (identical to `FlowMatch::matches`)
//! A `Some` field whose layer is absent never matches (`udp_dst` on TCP or on an IPv4
//! fragment, `vlan_id` on an untagged frame, ...). Port ranges are inclusive. A `word` must
//! lie entirely inside the frame (`base = "frame"`) or inside the UDP payload as bounded by
//! the UDP length field (`base = "udp_payload"`).

use rtdaq_core::flow::{toeplitz_hash, RSS_KEY_SYMMETRIC};
use rtdaq_core::flow::{
    FlowAction, FlowMatch, FlowTable, Ipv4Prefix, PortRange, WordBase, WordMatch,
};
use rtdaq_core::wire::{ETHERTYPE_ECPRI, ETHERTYPE_IPV4, ETHERTYPE_QINQ, ETHERTYPE_VLAN};
use rtdaq_core::QueueId;

use super::asm::{op, Asm, AsmError, Aux, Label, Program, Size, Target};

/// Verdict that keeps the whole frame.
pub const ACCEPT: u32 = u32::MAX;

// Scratch slots.
const M_ET: u32 = 0;
const M_VID: u32 = 1;
const M_L3: u32 = 2;
const M_IP: u32 = 3;
const M_L4: u32 = 4;
const M_UDP: u32 = 5;
const M_UPLEN: u32 = 6;
const M_TAG: u32 = 7;
const M_ECPRI: u32 = 8;
const M_FLEN: u32 = 9;
const M_W: u32 = 10;
const M_H: u32 = 11;
const M_ACC: u32 = 12;
const SLOTS_USED: u32 = 13;

/// `M[VID]` when there is no VLAN tag (never equal to a 12-bit id).
const NO_VLAN: u32 = 0x1_0000;
/// `M[ECPRI]` when there is no eCPRI header.
const NO_ECPRI: u32 = 0x100;

/// The constant XORed into the RSS hash for each set bit of the 16-bit XOR of the 4-tuple's
/// six 16-bit words (bit 15 first).
///
/// With [`RSS_KEY_SYMMETRIC`] (period 16 bits) the Toeplitz window of input bit `p` depends
/// only on `p mod 16`, so the hash of the 12-byte tuple is a linear function of that XOR.
fn rss_bit_constants() -> [u32; 16] {
    core::array::from_fn(|j| toeplitz_hash(&RSS_KEY_SYMMETRIC, &(0x8000u16 >> j).to_be_bytes()))
}

/// Compiles the flow table of an interface into the filter of RX queue `queue`;
/// `catch_all` is the queue that receives unclaimed frames (see the module docs).
///
/// # Errors
/// [`AsmError::TooLong`] when the rules need more than 4096 instructions (the kernel's
/// limit); the other variants would be bugs of this compiler.
pub fn compile_rx_filter<const N: usize>(
    table: &FlowTable<N>,
    queue: QueueId,
    catch_all: QueueId,
) -> Result<Program, AsmError> {
    let mut c = Compiler {
        a: Asm::new(),
        queue,
        catch_all,
        tail: Vec::new(),
    };
    let default = c.a.label();
    let (rules, fail) = (c.a.label(), c.a.label());
    c.prologue(table.parse_options().ecpri_udp_port, fail, rules);
    // The prologue's "too short for its L2 header" exits reach the catch-all verdict, after
    // the rules, through this trampoline (conditional jumps reach 255 instructions only).
    c.a.ja(rules);
    c.a.bind(fail);
    c.a.ja(default);
    c.a.bind(rules);
    for rule in table.rules() {
        let next = c.a.label();
        c.matcher(&rule.matcher, next);
        c.action(&rule.action);
        c.a.bind(next);
    }
    c.a.bind(default);
    let v = c.verdict(catch_all);
    c.a.ret_k(v);
    for (label, queues) in std::mem::take(&mut c.tail) {
        c.a.bind(label);
        c.rss(&queues);
    }
    c.a.finish()
}

struct Compiler {
    a: Asm,
    queue: QueueId,
    catch_all: QueueId,
    /// RSS bodies placed after the rules (reached with `ja`, any distance).
    tail: Vec<(Label, Vec<QueueId>)>,
}

impl Compiler {
    fn verdict(&self, target: QueueId) -> u32 {
        if target == self.queue {
            ACCEPT
        } else {
            0
        }
    }

    /// `len >= n`, else `fail`.
    fn need_len(&mut self, n: u32, fail: Label) {
        self.a.ld_len().jmp_k(op::JGE, n, Target::Next, fail);
    }

    fn prologue(&mut self, ecpri_udp_port: Option<u16>, default: Label, rules: Label) {
        let a = &mut self.a;
        a.ld_imm(0);
        for s in 0..SLOTS_USED {
            a.st(s);
        }
        a.ld_imm(NO_VLAN).st(M_VID).ld_imm(NO_ECPRI).st(M_ECPRI);
        a.ld_len().st(M_FLEN);
        self.need_len(14, default);
        let a = &mut self.a;
        let (noaux, inner, tag1, tag2, l2done) =
            (a.label(), a.label(), a.label(), a.label(), a.label());
        a.ld_aux(Aux::VlanTagPresent)
            .jmp_k(op::JEQ, 0, noaux, Target::Next);
        // The kernel stripped the outer tag: it is in the ancillary data, the frame as
        // delivered is 4 bytes longer, and the frame may still carry an inner 802.1Q tag.
        a.ld_aux(Aux::VlanTag)
            .alu_k(op::AND, 0xfff)
            .st(M_VID)
            .ld_imm(4)
            .st(M_TAG)
            .ld_mem(M_FLEN)
            .alu_k(op::ADD, 4)
            .st(M_FLEN)
            .ld_abs(Size::Half, 12)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_VLAN), inner, Target::Next)
            .st(M_ET)
            .ld_imm(14)
            .st(M_L3)
            .ja(l2done);
        a.bind(inner);
        self.need_len(18, default);
        let a = &mut self.a;
        a.ld_abs(Size::Half, 16)
            .st(M_ET)
            .ld_imm(18)
            .st(M_L3)
            .ja(l2done);
        // No stripped tag: up to two tags in the frame.
        a.bind(noaux);
        a.ld_abs(Size::Half, 12)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_VLAN), tag1, Target::Next)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_QINQ), tag1, Target::Next)
            .st(M_ET)
            .ld_imm(14)
            .st(M_L3)
            .ja(l2done);
        a.bind(tag1);
        self.need_len(18, default);
        let a = &mut self.a;
        a.ld_abs(Size::Half, 14)
            .alu_k(op::AND, 0xfff)
            .st(M_VID)
            .ld_abs(Size::Half, 16)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_VLAN), tag2, Target::Next)
            .st(M_ET)
            .ld_imm(18)
            .st(M_L3)
            .ja(l2done);
        a.bind(tag2);
        self.need_len(22, default);
        let a = &mut self.a;
        a.ld_abs(Size::Half, 20).st(M_ET).ld_imm(22).st(M_L3);
        a.bind(l2done);

        // L3.
        let (ip, ecpri_eth) = (a.label(), a.label());
        a.ld_mem(M_ET)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_IPV4), ip, Target::Next)
            .jmp_k(op::JEQ, u32::from(ETHERTYPE_ECPRI), ecpri_eth, rules);
        a.bind(ecpri_eth);
        a.ldx_len()
            .ld_mem(M_L3)
            .alu_k(op::ADD, 4)
            .jmp_x(op::JGT, rules, Target::Next)
            .ldx_mem(M_L3)
            .ld_ind(Size::Byte, 1)
            .st(M_ECPRI)
            .ja(rules);
        a.bind(ip);
        let udp_short = a.label();
        a.ldx_len()
            .ld_mem(M_L3)
            .alu_k(op::ADD, 20)
            .jmp_x(op::JGT, rules, Target::Next)
            .ld_imm(1)
            .st(M_IP)
            .ldx_mem(M_L3)
            .ld_ind(Size::Byte, 0)
            .alu_k(op::AND, 0xf)
            .alu_k(op::LSH, 2)
            .alu_x(op::ADD)
            .st(M_L4)
            .ld_ind(Size::Byte, 9)
            .jmp_k(op::JEQ, 17, Target::Next, rules)
            .ld_ind(Size::Half, 6)
            .jmp_k(op::JSET, 0x3fff, rules, Target::Next)
            .ldx_len()
            .ld_mem(M_L4)
            .alu_k(op::ADD, 8)
            .jmp_x(op::JGT, rules, Target::Next)
            .ld_imm(1)
            .st(M_UDP)
            .ldx_mem(M_L4)
            .ld_ind(Size::Half, 4)
            .jmp_k(op::JGE, 8, Target::Next, udp_short)
            .alu_k(op::SUB, 8)
            .st(M_UPLEN);
        a.bind(udp_short);
        if let Some(port) = ecpri_udp_port {
            // eCPRI over UDP on the configured destination port.
            a.ldx_mem(M_L4)
                .ld_ind(Size::Half, 2)
                .jmp_k(op::JEQ, u32::from(port), Target::Next, rules)
                .ld_mem(M_UPLEN)
                .jmp_k(op::JGE, 4, Target::Next, rules)
                .ldx_len()
                .ld_mem(M_L4)
                .alu_k(op::ADD, 12)
                .jmp_x(op::JGT, rules, Target::Next)
                .ldx_mem(M_L4)
                .ld_ind(Size::Byte, 9)
                .st(M_ECPRI);
        }
    }

    /// Falls through when every field of `m` matches, else jumps to `next`.
    fn matcher(&mut self, m: &FlowMatch, next: Label) {
        let a = &mut self.a;
        if let Some(e) = m.ethertype {
            a.ld_mem(M_ET)
                .jmp_k(op::JEQ, u32::from(e), Target::Next, next);
        }
        if let Some(v) = m.vlan_id {
            a.ld_mem(M_VID)
                .jmp_k(op::JEQ, u32::from(v), Target::Next, next);
        }
        if m.ipv4_src.is_some() || m.ipv4_dst.is_some() || m.ipv4_total_len.is_some() {
            a.ld_mem(M_IP).jmp_k(op::JEQ, 0, next, Target::Next);
            for (p, off) in [(m.ipv4_src, 12), (m.ipv4_dst, 16)] {
                if let Some(p) = p {
                    self.prefix(p, off, next);
                }
            }
            if let Some(l) = m.ipv4_total_len {
                self.a.ldx_mem(M_L3).ld_ind(Size::Half, 2).jmp_k(
                    op::JEQ,
                    u32::from(l),
                    Target::Next,
                    next,
                );
            }
        }
        let udp_word = m.word.is_some_and(|w| w.base == WordBase::UdpPayload);
        if m.udp_src.is_some() || m.udp_dst.is_some() || udp_word {
            self.a.ld_mem(M_UDP).jmp_k(op::JEQ, 0, next, Target::Next);
            for (r, off) in [(m.udp_src, 0), (m.udp_dst, 2)] {
                if let Some(r) = r {
                    self.ports(r, off, next);
                }
            }
        }
        if let Some(t) = m.ecpri_msg_type {
            self.a
                .ld_mem(M_ECPRI)
                .jmp_k(op::JEQ, u32::from(t), Target::Next, next);
        }
        if let Some(w) = m.word {
            match w.base {
                WordBase::Frame => self.frame_word(w, next),
                WordBase::UdpPayload => self.payload_word(w, next),
            }
        }
    }

    fn prefix(&mut self, p: Ipv4Prefix, off: u32, next: Label) {
        let mask = p.mask();
        if mask == 0 {
            return;
        }
        let want = u32::from_be_bytes(p.addr) & mask;
        self.a.ldx_mem(M_L3).ld_ind(Size::Word, off);
        if mask != u32::MAX {
            self.a.alu_k(op::AND, mask);
        }
        self.a.jmp_k(op::JEQ, want, Target::Next, next);
    }

    fn ports(&mut self, r: PortRange, off: u32, next: Label) {
        if r.lo == 0 && r.hi == u16::MAX {
            return;
        }
        let a = &mut self.a;
        a.ldx_mem(M_L4).ld_ind(Size::Half, off);
        if r.lo == r.hi {
            a.jmp_k(op::JEQ, u32::from(r.lo), Target::Next, next);
            return;
        }
        if r.lo > 0 {
            a.jmp_k(op::JGE, u32::from(r.lo), Target::Next, next);
        }
        if r.hi < u16::MAX {
            a.jmp_k(op::JGT, u32::from(r.hi), next, Target::Next);
        }
    }

    /// `value & mask == A & mask`, else `next`.
    fn compare_word(&mut self, w: WordMatch, next: Label) {
        if w.mask != u32::MAX {
            self.a.alu_k(op::AND, w.mask);
        }
        self.a.jmp_k(op::JEQ, w.value & w.mask, Target::Next, next);
    }

    /// A word at an offset of the frame as delivered (with a stripped VLAN tag put back).
    fn frame_word(&mut self, w: WordMatch, next: Label) {
        let o = u32::from(w.offset);
        let a = &mut self.a;
        a.ld_mem(M_FLEN).jmp_k(op::JGE, o + 4, Target::Next, next);
        if o + 4 <= 12 {
            // Before any tag: the same bytes whether or not the kernel stripped one.
            a.ld_abs(Size::Word, o);
            return self.compare_word(w, next);
        }
        let (plain, cmp) = (a.label(), a.label());
        a.ld_mem(M_TAG).jmp_k(op::JEQ, 0, plain, Target::Next);
        if o >= 16 {
            // After the stripped tag: 4 bytes earlier in the data the filter sees.
            a.ld_abs(Size::Word, o - 4);
        } else {
            // The word overlaps the stripped tag: assemble it byte by byte.
            for i in 0..4u32 {
                let b = o + i;
                match b {
                    0..=11 => {
                        a.ld_abs(Size::Byte, b);
                    }
                    12 => {
                        a.ld_aux(Aux::VlanTpid).alu_k(op::RSH, 8);
                    }
                    13 => {
                        a.ld_aux(Aux::VlanTpid).alu_k(op::AND, 0xff);
                    }
                    14 => {
                        a.ld_aux(Aux::VlanTag)
                            .alu_k(op::RSH, 8)
                            .alu_k(op::AND, 0xff);
                    }
                    15 => {
                        a.ld_aux(Aux::VlanTag).alu_k(op::AND, 0xff);
                    }
                    _ => {
                        a.ld_abs(Size::Byte, b - 4);
                    }
                }
                if i < 3 {
                    a.alu_k(op::LSH, 8 * (3 - i));
                }
                if i > 0 {
                    a.ldx_mem(M_ACC).alu_x(op::OR);
                }
                if i < 3 {
                    a.st(M_ACC);
                }
            }
        }
        a.ja(cmp);
        a.bind(plain);
        a.ld_abs(Size::Word, o);
        a.bind(cmp);
        self.compare_word(w, next);
    }

    /// A word at an offset of the UDP payload (bounded by the UDP length field).
    fn payload_word(&mut self, w: WordMatch, next: Label) {
        let o = u32::from(w.offset);
        self.a
            .ld_mem(M_UPLEN)
            .jmp_k(op::JGE, o + 4, Target::Next, next)
            .ldx_len()
            .ld_mem(M_L4)
            .alu_k(op::ADD, 8 + o + 4)
            .jmp_x(op::JGT, next, Target::Next)
            .ldx_mem(M_L4)
            .ld_ind(Size::Word, 8 + o);
        self.compare_word(w, next);
    }

    fn action(&mut self, action: &FlowAction) {
        match action {
            FlowAction::Queue(t) => {
                let v = self.verdict(*t);
                self.a.ret_k(v);
            }
            FlowAction::Drop => {
                let v = self.verdict(self.catch_all);
                self.a.ret_k(v);
            }
            FlowAction::Rss(qs) if qs.contains(&self.queue) => {
                let l = self.a.label();
                self.a.ja(l);
                self.tail.push((l, qs.to_vec()));
            }
            FlowAction::Rss(_) => {
                self.a.ret_k(0);
            }
        }
    }

    /// Accepts when this queue is `queues[hash % len]` (or `queues[0]` for frames that are
    /// not unfragmented IPv4/UDP).
    fn rss(&mut self, queues: &[QueueId]) {
        let consts = rss_bit_constants();
        let a = &mut self.a;
        let (idx0, accept) = (a.label(), a.label());
        a.ld_mem(M_UDP).jmp_k(op::JEQ, 0, idx0, Target::Next);
        // w = src_hi ^ src_lo ^ dst_hi ^ dst_lo ^ sport ^ dport
        a.ldx_mem(M_L3)
            .ld_ind(Size::Word, 12)
            .st(M_W)
            .ld_ind(Size::Word, 16)
            .ldx_mem(M_W)
            .alu_x(op::XOR)
            .st(M_W)
            .ldx_mem(M_L4)
            .ld_ind(Size::Word, 0)
            .ldx_mem(M_W)
            .alu_x(op::XOR)
            .st(M_W)
            .alu_k(op::RSH, 16)
            .ldx_mem(M_W)
            .alu_x(op::XOR)
            .alu_k(op::AND, 0xffff)
            .st(M_W)
            .ld_imm(0)
            .st(M_H);
        for (j, c) in consts.iter().enumerate() {
            let skip = a.label();
            a.ld_mem(M_W)
                .jmp_k(op::JSET, 0x8000 >> j, Target::Next, skip)
                .ld_mem(M_H)
                .alu_k(op::XOR, *c)
                .st(M_H);
            a.bind(skip);
        }
        a.ld_mem(M_H).alu_k(op::MOD, queues.len() as u32);
        for (p, q) in queues.iter().enumerate() {
            if *q == self.queue {
                a.jmp_k(op::JEQ, p as u32, accept, Target::Next);
            }
        }
        a.ret_k(0);
        a.bind(idx0);
        let v = if queues.first() == Some(&self.queue) {
            ACCEPT
        } else {
            0
        };
        a.ret_k(v);
        a.bind(accept);
        a.ret_k(ACCEPT);
    }
}

#[cfg(test)]
mod tests;
