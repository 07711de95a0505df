//! [`FlowRule`]: an `rte_flow` rule on a port, destroyed on drop; the conversion of a
//! [`FlowSpec`] into DPDK's item/action arrays, and `rte_flow_error` into [`DpdkError::Flow`].
use std::any::Any;
use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};

use super::{raw, result};
use crate::error::{errno_name, DpdkError, Result};
use crate::flow::{FlowAction, FlowItem, FlowSpec};
use crate::Port;

/// RSS hash types of [`FlowAction::Rss`]: `RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP`
/// (`RTE_BIT64(2) | RTE_BIT64(5)`, rte_ethdev.h; macros bindgen does not expand).
const RSS_IPV4_UDP: u64 = (1 << 2) | (1 << 5);

/// A flow rule created on a port (`rte_flow_create`). Keeps the port open (it holds a
/// [`Port`] handle) and destroys the rule (`rte_flow_destroy`) when dropped.
#[derive(Debug)]
pub struct FlowRule {
    port: Port,
    flow: NonNull<raw::rte_flow>,
    spec: FlowSpec,
}

// SAFETY: an rte_flow handle is an opaque token of its port; DPDK 22.11 serialises the flow
// API per port (ethdev takes the port's flow_ops_mutex unless the PMD declares its ops
// thread-safe), so destroying it from another thread is allowed.
unsafe impl Send for FlowRule {}
// SAFETY: &FlowRule only reads the Rust-side spec and port; the handle is never used
// through a shared reference.
unsafe impl Sync for FlowRule {}

/// The C arrays of one rule and the spec/mask/conf storage they point into.
struct Built {
    attr: raw::rte_flow_attr,
    items: Vec<raw::rte_flow_item>,
    actions: Vec<raw::rte_flow_action>,
    /// Boxes the item/action pointers point into (stable addresses).
    _keep: Vec<Box<dyn Any>>,
}

/// Stores `spec` and `mask` in `keep` and returns the item pointing at them.
fn item<T: Any>(
    keep: &mut Vec<Box<dyn Any>>,
    ty: raw::rte_flow_item_type,
    spec: T,
    mask: T,
) -> raw::rte_flow_item {
    let spec = Box::new(spec);
    let mask = Box::new(mask);
    let it = raw::rte_flow_item {
        type_: ty,
        spec: ptr::from_ref::<T>(&spec).cast::<c_void>(),
        last: ptr::null(),
        mask: ptr::from_ref::<T>(&mask).cast::<c_void>(),
    };
    keep.push(spec);
    keep.push(mask);
    it
}

fn build(spec: &FlowSpec) -> Built {
    let mut keep: Vec<Box<dyn Any>> = Vec::new();
    let mut attr = raw::rte_flow_attr {
        group: spec.group,
        priority: spec.priority,
        ..Default::default()
    };
    attr.set_ingress(1);
    let mut items = Vec::with_capacity(spec.pattern.len() + 1);
    for it in &spec.pattern {
        items.push(match *it {
            FlowItem::Eth { ether_type } => {
                let mut s = raw::rte_flow_item_eth::default();
                let mut m = raw::rte_flow_item_eth::default();
                if let Some(t) = ether_type {
                    s.__bindgen_anon_1.hdr.ether_type = t.to_be();
                    m.__bindgen_anon_1.hdr.ether_type = 0xffff;
                }
                if ether_type.is_none() {
                    // An empty layer: no spec, no mask (matches any Ethernet frame).
                    raw::rte_flow_item {
                        type_: raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH,
                        spec: ptr::null(),
                        last: ptr::null(),
                        mask: ptr::null(),
                    }
                } else {
                    item(
                        &mut keep,
                        raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH,
                        s,
                        m,
                    )
                }
            }
            FlowItem::Vlan { vid, inner_type } => {
                let mut s = raw::rte_flow_item_vlan::default();
                let mut m = raw::rte_flow_item_vlan::default();
                s.__bindgen_anon_1.hdr.vlan_tci = (vid & 0x0fff).to_be();
                m.__bindgen_anon_1.hdr.vlan_tci = 0x0fffu16.to_be();
                if let Some(t) = inner_type {
                    s.__bindgen_anon_1.hdr.eth_proto = t.to_be();
                    m.__bindgen_anon_1.hdr.eth_proto = 0xffff;
                }
                item(
                    &mut keep,
                    raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_VLAN,
                    s,
                    m,
                )
            }
            FlowItem::Ipv4 {
                src,
                dst,
                total_len,
            } => {
                let mut s = raw::rte_flow_item_ipv4::default();
                let mut m = raw::rte_flow_item_ipv4::default();
                if let Some((v, k)) = src {
                    s.hdr.src_addr = (v & k).to_be();
                    m.hdr.src_addr = k.to_be();
                }
                if let Some((v, k)) = dst {
                    s.hdr.dst_addr = (v & k).to_be();
                    m.hdr.dst_addr = k.to_be();
                }
                if let Some(l) = total_len {
                    s.hdr.total_length = l.to_be();
                    m.hdr.total_length = 0xffff;
                }
                item(
                    &mut keep,
                    raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV4,
                    s,
                    m,
                )
            }
            FlowItem::Udp { src, dst } => {
                let mut s = raw::rte_flow_item_udp::default();
                let mut m = raw::rte_flow_item_udp::default();
                if let Some((v, k)) = src {
                    s.hdr.src_port = (v & k).to_be();
                    m.hdr.src_port = k.to_be();
                }
                if let Some((v, k)) = dst {
                    s.hdr.dst_port = (v & k).to_be();
                    m.hdr.dst_port = k.to_be();
                }
                item(
                    &mut keep,
                    raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_UDP,
                    s,
                    m,
                )
            }
        });
    }
    items.push(raw::rte_flow_item {
        type_: raw::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_END,
        spec: ptr::null(),
        last: ptr::null(),
        mask: ptr::null(),
    });
    let mut actions = Vec::with_capacity(spec.actions.len() + 1);
    for a in &spec.actions {
        actions.push(match a {
            FlowAction::Queue(q) => {
                let conf = Box::new(raw::rte_flow_action_queue { index: *q });
                let p = ptr::from_ref(&*conf).cast::<c_void>();
                keep.push(conf);
                raw::rte_flow_action {
                    type_: raw::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_QUEUE,
                    conf: p,
                }
            }
            FlowAction::Rss { queues, key } => {
                let queues: Box<[u16]> = queues.clone().into_boxed_slice();
                let key: Box<[u8]> = key.clone().into_boxed_slice();
                let conf = Box::new(raw::rte_flow_action_rss {
                    func: raw::rte_eth_hash_function_RTE_ETH_HASH_FUNCTION_DEFAULT,
                    level: 0,
                    types: RSS_IPV4_UDP,
                    key_len: key.len() as u32,
                    queue_num: queues.len() as u32,
                    key: if key.is_empty() {
                        ptr::null()
                    } else {
                        key.as_ptr()
                    },
                    queue: queues.as_ptr(),
                });
                let p = ptr::from_ref(&*conf).cast::<c_void>();
                keep.push(Box::new(queues));
                keep.push(Box::new(key));
                keep.push(conf);
                raw::rte_flow_action {
                    type_: raw::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_RSS,
                    conf: p,
                }
            }
            FlowAction::Drop => raw::rte_flow_action {
                type_: raw::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_DROP,
                conf: ptr::null(),
            },
        });
    }
    actions.push(raw::rte_flow_action {
        type_: raw::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_END,
        conf: ptr::null(),
    });
    Built {
        attr,
        items,
        actions,
        _keep: keep,
    }
}

/// Name of an `rte_flow_error_type`.
fn cause_name(t: raw::rte_flow_error_type) -> &'static str {
    const NAMES: [&str; 18] = [
        "NONE",
        "UNSPECIFIED",
        "HANDLE",
        "ATTR_GROUP",
        "ATTR_PRIORITY",
        "ATTR_INGRESS",
        "ATTR_EGRESS",
        "ATTR_TRANSFER",
        "ATTR",
        "ITEM_NUM",
        "ITEM_SPEC",
        "ITEM_LAST",
        "ITEM_MASK",
        "ITEM",
        "ACTION_NUM",
        "ACTION_CONF",
        "ACTION",
        "STATE",
    ];
    NAMES.get(t as usize).copied().unwrap_or("?")
}

/// `rte_flow_error` → [`DpdkError::Flow`]. Must run before the port is closed (the message
/// points into the PMD).
fn flow_err(op: &'static str, port: &Port, errno: i32, e: &raw::rte_flow_error) -> DpdkError {
    let message = if e.message.is_null() {
        result::strerror(errno)
    } else {
        // SAFETY: a non-NULL message is a NUL-terminated constant string of the PMD, valid
        // while the port is configured (it is: `port` is open); copied out at once.
        unsafe { CStr::from_ptr(e.message) }
            .to_string_lossy()
            .into_owned()
    };
    DpdkError::Flow {
        op,
        port: port.id(),
        driver: port.info().map(|i| i.driver).unwrap_or_default(),
        errno,
        errno_name: errno_name(errno),
        cause: cause_name(e.type_),
        message,
    }
}

impl FlowRule {
    /// Asks the PMD whether it would accept `spec` on `port` (`rte_flow_validate`); creates
    /// nothing.
    ///
    /// # Errors
    /// [`DpdkError::Flow`] with the PMD's reason (`ENOSYS`: the PMD has no `rte_flow`).
    pub fn validate(port: &Port, spec: &FlowSpec) -> Result<()> {
        let b = build(spec);
        let mut e = raw::rte_flow_error::default();
        // SAFETY: attr, the END-terminated item and action arrays and everything they point
        // to (b._keep) live until the call returns; e is a valid out struct.
        let rc = unsafe {
            raw::rte_flow_validate(
                port.id(),
                &b.attr,
                b.items.as_ptr(),
                b.actions.as_ptr(),
                &mut e,
            )
        };
        result::neg_errno(rc).map_err(|errno| flow_err("rte_flow_validate", port, errno, &e))?;
        Ok(())
    }

    /// Validates `spec`, then creates it on `port` (`rte_flow_validate` + `rte_flow_create`).
    ///
    /// # Errors
    /// [`DpdkError::Flow`] naming the call that refused and the PMD's reason.
    pub fn create(port: &Port, spec: &FlowSpec) -> Result<FlowRule> {
        Self::validate(port, spec)?;
        let b = build(spec);
        let mut e = raw::rte_flow_error::default();
        // SAFETY: as in validate; DPDK copies what it keeps, so b may go after the call.
        let flow = unsafe {
            raw::rte_flow_create(
                port.id(),
                &b.attr,
                b.items.as_ptr(),
                b.actions.as_ptr(),
                &mut e,
            )
        };
        let flow = result::null_rte_errno(flow)
            .map_err(|errno| flow_err("rte_flow_create", port, errno, &e))?;
        Ok(FlowRule {
            port: port.clone(),
            flow,
            spec: spec.clone(),
        })
    }

    /// The rule as created.
    pub fn spec(&self) -> &FlowSpec {
        &self.spec
    }

    /// The port it is on.
    pub fn port(&self) -> &Port {
        &self.port
    }
}

impl Drop for FlowRule {
    /// `rte_flow_destroy`.
    ///
    /// # Panics
    /// If DPDK refuses to destroy a rule it created (a bug), unless already panicking.
    fn drop(&mut self) {
        let mut e = raw::rte_flow_error::default();
        // SAFETY: the handle came from rte_flow_create on this port, which is still open
        // (self.port holds it), and is destroyed exactly once, here.
        let rc = unsafe { raw::rte_flow_destroy(self.port.id(), self.flow.as_ptr(), &mut e) };
        if let Err(errno) = result::neg_errno(rc) {
            if !std::thread::panicking() {
                panic!(
                    "rte_flow_destroy of [{}] failed: {}",
                    self.spec,
                    flow_err("rte_flow_destroy", &self.port, errno, &e)
                );
            }
        }
    }
}
