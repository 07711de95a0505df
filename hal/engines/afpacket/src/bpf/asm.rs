//! A small classic-BPF assembler: [`Asm`] emits [`Insn`]s with forward [`Label`]s, and
//! [`Asm::finish`] resolves them and checks the program the way the kernel's
//! `bpf_check_classic` does (jumps in range and forward, a `ret` at the end, every scratch
//! slot stored before it is loaded on every path), so a program that leaves here is one the
//! kernel accepts. [`Program::run`] is a reference interpreter for tests and tools.

use std::fmt;

/// Most instructions in one program (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;
/// Scratch memory slots (`BPF_MEMWORDS`).
pub const MEM_WORDS: u32 = 16;

/// Opcode parts (`linux/filter.h`, `linux/bpf_common.h`).
pub mod op {
    /// Load into A.
    pub const LD: u16 = 0x00;
    /// Load into X.
    pub const LDX: u16 = 0x01;
    /// Store A.
    pub const ST: u16 = 0x02;
    /// Store X.
    pub const STX: u16 = 0x03;
    /// Arithmetic on A.
    pub const ALU: u16 = 0x04;
    /// Jump.
    pub const JMP: u16 = 0x05;
    /// Return.
    pub const RET: u16 = 0x06;
    /// Register transfers.
    pub const MISC: u16 = 0x07;
    /// 32-bit word.
    pub const W: u16 = 0x00;
    /// 16-bit half word.
    pub const H: u16 = 0x08;
    /// Byte.
    pub const B: u16 = 0x10;
    /// Immediate.
    pub const IMM: u16 = 0x00;
    /// Absolute packet offset.
    pub const ABS: u16 = 0x20;
    /// Packet offset X + k.
    pub const IND: u16 = 0x40;
    /// Scratch memory.
    pub const MEM: u16 = 0x60;
    /// Packet length.
    pub const LEN: u16 = 0x80;
    /// `4 * (P[k] & 0xf)` (IPv4 header length), into X.
    pub const MSH: u16 = 0xa0;
    /// A + operand.
    pub const ADD: u16 = 0x00;
    /// A − operand.
    pub const SUB: u16 = 0x10;
    /// A × operand.
    pub const MUL: u16 = 0x20;
    /// A ÷ operand.
    pub const DIV: u16 = 0x30;
    /// A | operand.
    pub const OR: u16 = 0x40;
    /// A & operand.
    pub const AND: u16 = 0x50;
    /// A << operand.
    pub const LSH: u16 = 0x60;
    /// A >> operand.
    pub const RSH: u16 = 0x70;
    /// −A.
    pub const NEG: u16 = 0x80;
    /// A mod operand.
    pub const MOD: u16 = 0x90;
    /// A ^ operand.
    pub const XOR: u16 = 0xa0;
    /// Unconditional jump by k.
    pub const JA: u16 = 0x00;
    /// Jump if A == operand.
    pub const JEQ: u16 = 0x10;
    /// Jump if A > operand.
    pub const JGT: u16 = 0x20;
    /// Jump if A >= operand.
    pub const JGE: u16 = 0x30;
    /// Jump if A & operand != 0.
    pub const JSET: u16 = 0x40;
    /// Operand is the constant k.
    pub const K: u16 = 0x00;
    /// Operand is X.
    pub const X: u16 = 0x08;
    /// Return A.
    pub const A: u16 = 0x10;
    /// X = A.
    pub const TAX: u16 = 0x00;
    /// A = X.
    pub const TXA: u16 = 0x80;
}

/// One classic BPF instruction, laid out like `struct sock_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true (conditional jumps).
    pub jt: u8,
    /// Jump offset if false (conditional jumps).
    pub jf: u8,
    /// Constant operand.
    pub k: u32,
}

impl Insn {
    /// An instruction without jump offsets.
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// The class (`op::LD` ... `op::MISC`).
    pub const fn class(&self) -> u16 {
        self.code & 0x07
    }
}

/// Packet access sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// 32 bits, big-endian.
    Word,
    /// 16 bits, big-endian.
    Half,
    /// 8 bits.
    Byte,
}

impl Size {
    const fn code(self) -> u16 {
        match self {
            Size::Word => op::W,
            Size::Half => op::H,
            Size::Byte => op::B,
        }
    }

    const fn bytes(self) -> usize {
        match self {
            Size::Word => 4,
            Size::Half => 2,
            Size::Byte => 1,
        }
    }
}

/// `SKF_AD_OFF` (-0x1000): base of the ancillary-data offsets.
const SKF_AD_OFF: i32 = -0x1000;

/// Ancillary data a load can read instead of packet bytes (`SKF_AD_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aux {
    /// The VLAN TCI the kernel stripped from the frame (`SKF_AD_VLAN_TAG`).
    VlanTag,
    /// 1 when the kernel stripped a VLAN tag, else 0 (`SKF_AD_VLAN_TAG_PRESENT`).
    VlanTagPresent,
    /// The stripped tag's TPID, host order (`SKF_AD_VLAN_TPID`).
    VlanTpid,
}

impl Aux {
    const fn offset(self) -> i32 {
        match self {
            Aux::VlanTag => 44,
            Aux::VlanTagPresent => 48,
            Aux::VlanTpid => 60,
        }
    }

    /// The load offset `k` (`SKF_AD_OFF + SKF_AD_*`).
    pub const fn k(self) -> u32 {
        (SKF_AD_OFF + self.offset()) as u32
    }

    fn from_k(k: u32) -> Option<Aux> {
        [Aux::VlanTag, Aux::VlanTagPresent, Aux::VlanTpid]
            .into_iter()
            .find(|a| a.k() == k)
    }
}

/// A forward jump target, bound once with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The next instruction (offset 0).
    Next,
    /// A label.
    To(Label),
}

impl From<Label> for Target {
    fn from(l: Label) -> Target {
        Target::To(l)
    }
}

/// Why a program could not be assembled (each one a bug in the generator, or a program too
/// big for the kernel).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AsmError {
    /// More than [`MAX_INSNS`] instructions.
    #[error("{len} instructions, more than the kernel's limit of {MAX_INSNS}")]
    TooLong {
        /// Instructions generated.
        len: usize,
    },
    /// A conditional jump's target is 256 or more instructions ahead.
    #[error("the jump at instruction {at} is {offset} instructions long (at most 255)")]
    JumpTooFar {
        /// Instruction index.
        at: usize,
        /// Offset needed.
        offset: usize,
    },
    /// A jump to a label that was never bound, or bound before the jump.
    #[error("the jump at instruction {at} has no forward target")]
    BadLabel {
        /// Instruction index.
        at: usize,
    },
    /// The last instruction is not a `ret` (or the program is empty).
    #[error("the program does not end with a ret")]
    NoReturn,
    /// A jump leaves the program.
    #[error("the jump at instruction {at} leaves the program")]
    OutOfRange {
        /// Instruction index.
        at: usize,
    },
    /// A scratch slot is loaded on a path where it was never stored (the kernel refuses).
    #[error("instruction {at} reads scratch slot M[{slot}] before any store on some path")]
    UninitMemory {
        /// Instruction index.
        at: usize,
        /// Slot.
        slot: u32,
    },
    /// A scratch slot index ≥ 16.
    #[error("instruction {at} uses scratch slot M[{slot}] (there are 16)")]
    BadSlot {
        /// Instruction index.
        at: usize,
        /// Slot.
        slot: u32,
    },
}

#[derive(Debug, Clone, Copy)]
enum Fixup {
    Cond { at: usize, jt: Target, jf: Target },
    Ja { at: usize, to: Label },
}

/// The assembler. Every method appends one instruction (or binds a label).
#[derive(Debug, Default, Clone)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<Fixup>,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Instructions so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// True before the first instruction.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction.
    ///
    /// # Panics
    /// When `l` is already bound (a generator bug).
    pub fn bind(&mut self, l: Label) {
        assert!(self.labels[l.0].is_none(), "label bound twice");
        self.labels[l.0] = Some(self.insns.len());
    }

    fn push(&mut self, i: Insn) -> &mut Self {
        self.insns.push(i);
        self
    }

    /// `A = P[k]` (packet bytes at absolute offset `k`).
    pub fn ld_abs(&mut self, size: Size, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::LD | size.code() | op::ABS, k))
    }

    /// `A = P[X + k]`.
    pub fn ld_ind(&mut self, size: Size, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::LD | size.code() | op::IND, k))
    }

    /// `A = ancillary value`.
    pub fn ld_aux(&mut self, aux: Aux) -> &mut Self {
        self.push(Insn::stmt(op::LD | op::W | op::ABS, aux.k()))
    }

    /// `A = packet length`.
    pub fn ld_len(&mut self) -> &mut Self {
        self.push(Insn::stmt(op::LD | op::W | op::LEN, 0))
    }

    /// `A = k`.
    pub fn ld_imm(&mut self, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::LD | op::IMM, k))
    }

    /// `A = M[slot]`.
    pub fn ld_mem(&mut self, slot: u32) -> &mut Self {
        self.push(Insn::stmt(op::LD | op::MEM, slot))
    }

    /// `X = k`.
    pub fn ldx_imm(&mut self, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::LDX | op::W | op::IMM, k))
    }

    /// `X = M[slot]`.
    pub fn ldx_mem(&mut self, slot: u32) -> &mut Self {
        self.push(Insn::stmt(op::LDX | op::W | op::MEM, slot))
    }

    /// `X = packet length`.
    pub fn ldx_len(&mut self) -> &mut Self {
        self.push(Insn::stmt(op::LDX | op::W | op::LEN, 0))
    }

    /// `M[slot] = A`.
    pub fn st(&mut self, slot: u32) -> &mut Self {
        self.push(Insn::stmt(op::ST, slot))
    }

    /// `M[slot] = X`.
    pub fn stx(&mut self, slot: u32) -> &mut Self {
        self.push(Insn::stmt(op::STX, slot))
    }

    /// `A = A <alu> k` (`alu` one of `op::ADD` ... `op::XOR`).
    pub fn alu_k(&mut self, alu: u16, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::ALU | alu | op::K, k))
    }

    /// `A = A <alu> X`.
    pub fn alu_x(&mut self, alu: u16) -> &mut Self {
        self.push(Insn::stmt(op::ALU | alu | op::X, 0))
    }

    /// `X = A`.
    pub fn tax(&mut self) -> &mut Self {
        self.push(Insn::stmt(op::MISC | op::TAX, 0))
    }

    /// `A = X`.
    pub fn txa(&mut self) -> &mut Self {
        self.push(Insn::stmt(op::MISC | op::TXA, 0))
    }

    /// `return k` (0 drops, otherwise the number of bytes to keep).
    pub fn ret_k(&mut self, k: u32) -> &mut Self {
        self.push(Insn::stmt(op::RET | op::K, k))
    }

    /// `return A`.
    pub fn ret_a(&mut self) -> &mut Self {
        self.push(Insn::stmt(op::RET | op::A, 0))
    }

    /// Unconditional jump to `to` (any forward distance).
    pub fn ja(&mut self, to: Label) -> &mut Self {
        self.fixups.push(Fixup::Ja {
            at: self.insns.len(),
            to,
        });
        self.push(Insn::stmt(op::JMP | op::JA, 0))
    }

    /// `if A <jmp> k goto jt else goto jf` (`jmp` one of `op::JEQ`, `op::JGT`, `op::JGE`,
    /// `op::JSET`); targets at most 255 instructions ahead.
    pub fn jmp_k(
        &mut self,
        jmp: u16,
        k: u32,
        jt: impl Into<Target>,
        jf: impl Into<Target>,
    ) -> &mut Self {
        self.cond(op::JMP | jmp | op::K, k, jt.into(), jf.into())
    }

    /// `if A <jmp> X goto jt else goto jf`.
    pub fn jmp_x(&mut self, jmp: u16, jt: impl Into<Target>, jf: impl Into<Target>) -> &mut Self {
        self.cond(op::JMP | jmp | op::X, 0, jt.into(), jf.into())
    }

    fn cond(&mut self, code: u16, k: u32, jt: Target, jf: Target) -> &mut Self {
        self.fixups.push(Fixup::Cond {
            at: self.insns.len(),
            jt,
            jf,
        });
        self.push(Insn::stmt(code, k))
    }

    fn offset(&self, at: usize, t: Target) -> Result<usize, AsmError> {
        match t {
            Target::Next => Ok(0),
            Target::To(l) => match self.labels[l.0] {
                Some(pos) if pos > at => Ok(pos - at - 1),
                _ => Err(AsmError::BadLabel { at }),
            },
        }
    }

    /// Resolves the labels and checks the program (see the module docs).
    ///
    /// # Errors
    /// [`AsmError`]: too long, a jump too far or backwards, no final `ret`, a scratch slot
    /// read before it is written.
    pub fn finish(mut self) -> Result<Program, AsmError> {
        if self.insns.len() > MAX_INSNS {
            return Err(AsmError::TooLong {
                len: self.insns.len(),
            });
        }
        for f in std::mem::take(&mut self.fixups) {
            match f {
                Fixup::Cond { at, jt, jf } => {
                    let (t, e) = (self.offset(at, jt)?, self.offset(at, jf)?);
                    for o in [t, e] {
                        if o > 255 {
                            return Err(AsmError::JumpTooFar { at, offset: o });
                        }
                    }
                    self.insns[at].jt = t as u8;
                    self.insns[at].jf = e as u8;
                }
                Fixup::Ja { at, to } => {
                    let o = self.offset(at, Target::To(to))?;
                    self.insns[at].k = o as u32;
                }
            }
        }
        let p = Program { insns: self.insns };
        p.check()?;
        Ok(p)
    }
}

/// A checked classic BPF program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
}

/// Stripped-VLAN metadata for [`Program::run`]: `(tpid, tci)` as the kernel keeps it.
pub type VlanAux = Option<(u16, u16)>;

impl Program {
    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// True for an empty program (never produced by [`Asm::finish`]).
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// The checks of the kernel's `bpf_check_classic` that a generator can get wrong.
    fn check(&self) -> Result<(), AsmError> {
        let n = self.insns.len();
        if n > MAX_INSNS {
            return Err(AsmError::TooLong { len: n });
        }
        if self.insns.last().is_none_or(|i| i.class() != op::RET) {
            return Err(AsmError::NoReturn);
        }
        // Scratch-memory initialisation along every path (`check_load_and_stores`).
        let mut masks = vec![u16::MAX; n];
        let mut valid: u16 = 0;
        for (at, i) in self.insns.iter().enumerate() {
            valid &= masks[at];
            let mem = i.code == op::LD | op::MEM || i.code == op::LDX | op::W | op::MEM;
            let store = i.class() == op::ST || i.class() == op::STX;
            if mem || store {
                if i.k >= MEM_WORDS {
                    return Err(AsmError::BadSlot { at, slot: i.k });
                }
                if store {
                    valid |= 1 << i.k;
                } else if valid & (1 << i.k) == 0 {
                    return Err(AsmError::UninitMemory { at, slot: i.k });
                }
            }
            if i.class() == op::JMP {
                let targets: &[usize] = if i.code == op::JMP | op::JA {
                    &[i.k as usize]
                } else {
                    &[i.jt as usize, i.jf as usize]
                };
                for &o in targets {
                    let to = at + 1 + o;
                    if to >= n {
                        return Err(AsmError::OutOfRange { at });
                    }
                    masks[to] &= valid;
                }
                valid = u16::MAX;
            }
        }
        Ok(())
    }

    /// Runs the program on `frame` like the kernel's socket filter would (a reference
    /// interpreter, not a fast one): `frame` is what the filter sees (without a VLAN tag the
    /// kernel stripped), `vlan` the stripped tag. Returns the filter's verdict: 0 = drop,
    /// otherwise the bytes to keep. A load outside the frame ends the program with 0, as in
    /// the kernel. Cold path (tests and tools).
    pub fn run(&self, frame: &[u8], vlan: VlanAux) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; MEM_WORDS as usize];
        let mut pc = 0usize;
        let load = |off: usize, size: Size| -> Option<u32> {
            let b = frame.get(off..off.checked_add(size.bytes())?)?;
            Some(b.iter().fold(0u32, |v, &c| (v << 8) | u32::from(c)))
        };
        while let Some(&i) = self.insns.get(pc) {
            pc += 1;
            let size = match i.code & 0x18 {
                op::H => Size::Half,
                op::B => Size::Byte,
                _ => Size::Word,
            };
            let operand = if i.code & op::X != 0 { x } else { i.k };
            match i.class() {
                op::LD => {
                    a = match i.code & 0xe0 {
                        op::IMM => i.k,
                        op::LEN => frame.len() as u32,
                        op::MEM => mem[i.k as usize],
                        op::ABS => match Aux::from_k(i.k) {
                            Some(Aux::VlanTagPresent) => u32::from(vlan.is_some()),
                            Some(Aux::VlanTag) => vlan.map_or(0, |v| u32::from(v.1)),
                            Some(Aux::VlanTpid) => vlan.map_or(0, |v| u32::from(v.0)),
                            None => match load(i.k as usize, size) {
                                Some(v) => v,
                                None => return 0,
                            },
                        },
                        op::IND => match load(x.wrapping_add(i.k) as usize, size) {
                            Some(v) => v,
                            None => return 0,
                        },
                        _ => return 0,
                    }
                }
                op::LDX => {
                    x = match i.code & 0xe0 {
                        op::IMM => i.k,
                        op::LEN => frame.len() as u32,
                        op::MEM => mem[i.k as usize],
                        op::MSH => match load(i.k as usize, Size::Byte) {
                            Some(v) => 4 * (v & 0xf),
                            None => return 0,
                        },
                        _ => return 0,
                    }
                }
                op::ST => mem[i.k as usize] = a,
                op::STX => mem[i.k as usize] = x,
                op::ALU => {
                    a = match i.code & 0xf0 {
                        op::ADD => a.wrapping_add(operand),
                        op::SUB => a.wrapping_sub(operand),
                        op::MUL => a.wrapping_mul(operand),
                        op::DIV if operand != 0 => a / operand,
                        op::MOD if operand != 0 => a % operand,
                        op::OR => a | operand,
                        op::AND => a & operand,
                        op::LSH => a.wrapping_shl(operand),
                        op::RSH => a.wrapping_shr(operand),
                        op::NEG => a.wrapping_neg(),
                        op::XOR => a ^ operand,
                        _ => return 0,
                    }
                }
                op::JMP => {
                    if i.code & 0xf0 == op::JA {
                        pc += i.k as usize;
                    } else {
                        let taken = match i.code & 0xf0 {
                            op::JEQ => a == operand,
                            op::JGT => a > operand,
                            op::JGE => a >= operand,
                            op::JSET => a & operand != 0,
                            _ => return 0,
                        };
                        pc += usize::from(if taken { i.jt } else { i.jf });
                    }
                }
                op::RET => return if i.code & op::A != 0 { a } else { i.k },
                _ => {
                    if i.code & 0xf8 == op::TXA {
                        a = x;
                    } else {
                        x = a;
                    }
                }
            }
        }
        0
    }
}

impl fmt::Display for Insn {
    /// One line in the style of `tcpdump -d` (without the index).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sz = match self.code & 0x18 {
            op::H => "h",
            op::B => "b",
            _ => "",
        };
        let src = if self.code & op::X != 0 {
            "x".to_owned()
        } else {
            format!("#{:#x}", self.k)
        };
        match self.class() {
            op::LD => match self.code & 0xe0 {
                op::IMM => write!(f, "ld #{:#x}", self.k),
                op::LEN => write!(f, "ld #len"),
                op::MEM => write!(f, "ld M[{}]", self.k),
                op::ABS => match Aux::from_k(self.k) {
                    Some(a) => write!(f, "ld {a:?}"),
                    None => write!(f, "ld{sz} [{}]", self.k),
                },
                _ => write!(f, "ld{sz} [x + {}]", self.k),
            },
            op::LDX => match self.code & 0xe0 {
                op::IMM => write!(f, "ldx #{:#x}", self.k),
                op::LEN => write!(f, "ldx #len"),
                op::MEM => write!(f, "ldx M[{}]", self.k),
                _ => write!(f, "ldxb 4*([{}]&0xf)", self.k),
            },
            op::ST => write!(f, "st M[{}]", self.k),
            op::STX => write!(f, "stx M[{}]", self.k),
            op::ALU => {
                let name = match self.code & 0xf0 {
                    op::ADD => "add",
                    op::SUB => "sub",
                    op::MUL => "mul",
                    op::DIV => "div",
                    op::OR => "or",
                    op::AND => "and",
                    op::LSH => "lsh",
                    op::RSH => "rsh",
                    op::NEG => return write!(f, "neg"),
                    op::MOD => "mod",
                    _ => "xor",
                };
                write!(f, "{name} {src}")
            }
            op::JMP => {
                let name = match self.code & 0xf0 {
                    op::JA => return write!(f, "ja +{}", self.k),
                    op::JEQ => "jeq",
                    op::JGT => "jgt",
                    op::JGE => "jge",
                    _ => "jset",
                };
                write!(f, "{name} {src} jt +{} jf +{}", self.jt, self.jf)
            }
            op::RET if self.code & op::A != 0 => write!(f, "ret a"),
            op::RET => write!(f, "ret #{:#x}", self.k),
            _ if self.code & 0xf8 == op::TXA => write!(f, "txa"),
            _ => write!(f, "tax"),
        }
    }
}

impl fmt::Display for Program {
    /// A listing, one numbered instruction per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, i) in self.insns.iter().enumerate() {
            writeln!(f, "({n:03}) {i}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_to_forward_offsets() {
        let mut a = Asm::new();
        let (yes, no) = (a.label(), a.label());
        a.ld_abs(Size::Half, 12)
            .jmp_k(op::JEQ, 0x0800, Target::Next, no)
            .jmp_k(op::JEQ, 0x0800, yes, no);
        a.bind(yes);
        a.ret_k(u32::MAX);
        a.bind(no);
        a.ret_k(0);
        let p = a.finish().unwrap();
        assert_eq!(
            p.insns()[1],
            Insn {
                code: 0x15,
                jt: 0,
                jf: 2,
                k: 0x800
            }
        );
        assert_eq!((p.insns()[2].jt, p.insns()[2].jf), (0, 1));
        assert_eq!(p.run(&[0; 12], None), 0, "short frame: the load fails");
        let mut f = [0u8; 14];
        f[12] = 8;
        assert_eq!(p.run(&f, None), u32::MAX);
        assert!(p.to_string().contains("(001) jeq #0x800 jt +0 jf +2"));
    }

    #[test]
    fn ja_reaches_anywhere_but_conditional_jumps_stop_at_255() {
        let mut a = Asm::new();
        let end = a.label();
        a.ja(end);
        for _ in 0..1000 {
            a.ld_imm(1);
        }
        a.bind(end);
        a.ret_k(7);
        let p = a.finish().unwrap();
        assert_eq!(p.insns()[0].k, 1000);
        assert_eq!(p.run(&[], None), 7);

        let mut a = Asm::new();
        let far = a.label();
        a.ld_imm(0).jmp_k(op::JEQ, 0, far, Target::Next);
        for _ in 0..256 {
            a.ld_imm(1);
        }
        a.bind(far);
        a.ret_k(0);
        assert_eq!(a.finish(), Err(AsmError::JumpTooFar { at: 1, offset: 256 }));
    }

    #[test]
    fn checker_rejects_what_the_kernel_rejects() {
        let mut a = Asm::new();
        a.ld_imm(0);
        assert_eq!(a.finish(), Err(AsmError::NoReturn));
        let mut a = Asm::new();
        let l = a.label();
        a.ld_imm(0).jmp_k(op::JEQ, 0, l, Target::Next).ret_k(0);
        assert_eq!(a.finish(), Err(AsmError::BadLabel { at: 1 }));
        // M[1] stored on one path only.
        let mut a = Asm::new();
        let (skip, join) = (a.label(), a.label());
        a.ld_len()
            .jmp_k(op::JGT, 10, skip, Target::Next)
            .st(1)
            .ja(join);
        a.bind(skip);
        a.ld_imm(3);
        a.bind(join);
        a.ld_mem(1).ret_a();
        assert_eq!(a.finish(), Err(AsmError::UninitMemory { at: 5, slot: 1 }));
        let mut a = Asm::new();
        a.st(16).ret_k(0);
        assert_eq!(a.finish(), Err(AsmError::BadSlot { at: 0, slot: 16 }));
        let mut a = Asm::new();
        for _ in 0..MAX_INSNS {
            a.ld_imm(0);
        }
        a.ret_k(0);
        assert_eq!(a.finish(), Err(AsmError::TooLong { len: MAX_INSNS + 1 }));
    }

    #[test]
    fn interpreter_alu_and_aux() {
        let mut a = Asm::new();
        a.ld_aux(Aux::VlanTagPresent)
            .st(0)
            .ld_aux(Aux::VlanTag)
            .alu_k(op::AND, 0xfff)
            .tax()
            .ld_aux(Aux::VlanTpid)
            .alu_k(op::LSH, 16)
            .alu_x(op::OR)
            .ldx_mem(0)
            .alu_x(op::ADD)
            .alu_k(op::MOD, 0x10000)
            .ret_a();
        let p = a.finish().unwrap();
        assert_eq!(p.run(&[], Some((0x8100, 0x2005))), 6);
        assert_eq!(p.run(&[], None), 0);
        assert_eq!(Aux::VlanTagPresent.k(), 0xffff_f030);
        assert!(p.to_string().contains("ld VlanTpid"));
    }
}
