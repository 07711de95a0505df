//! Flow steering (`ibv_create_flow`): [`FlowMatch`] (what to match, pure Rust) →
//! [`FlowAttr`] (the `ibv_flow_attr` followed by its Ethernet / IPv4 / UDP specs, as the
//! verbs ABI lays them out) → [`Flow`] (the rule on a raw packet QP, destroyed on drop).
use std::ptr::NonNull;

use super::qp::Qp;
use super::raw;
use super::result::{non_null, zero_or_errno};
use crate::error::Result;

/// What one steering rule matches. `None` fields are wildcards. Values in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowMatch {
    /// Destination MAC (exact).
    pub dst_mac: Option<[u8; 6]>,
    /// VLAN id (12 bits, exact).
    pub vlan: Option<u16>,
    /// IPv4 source `(address, mask)`.
    pub ipv4_src: Option<([u8; 4], [u8; 4])>,
    /// IPv4 destination `(address, mask)`.
    pub ipv4_dst: Option<([u8; 4], [u8; 4])>,
    /// UDP source port `(port, mask)`.
    pub udp_src: Option<(u16, u16)>,
    /// UDP destination port `(port, mask)`.
    pub udp_dst: Option<(u16, u16)>,
}

/// An `ibv_flow_attr` with its specs, laid out contiguously as `ibv_create_flow` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowAttr {
    bytes: Vec<u8>,
    specs: u8,
}

fn push_struct<T: Copy>(out: &mut Vec<u8>, v: &T) {
    // SAFETY: T is a plain-old-data bindgen struct (Copy, no padding that matters to
    // the kernel: it reads the declared sizes); reading its bytes is sound.
    let b = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) };
    out.extend_from_slice(b);
}

impl FlowAttr {
    /// Builds the rule for `port` at `priority` (lower first): an Ethernet spec always (the
    /// ConnectX providers require the L2 spec first), IPv4 when an address or a UDP port is
    /// matched, UDP when a port is matched. Cold path.
    pub fn build(m: &FlowMatch, port: u8, priority: u16) -> FlowAttr {
        let mut eth = raw::ibv_flow_spec_eth {
            type_: raw::IBV_FLOW_SPEC_ETH,
            size: size_of::<raw::ibv_flow_spec_eth>() as u16,
            ..Default::default()
        };
        if let Some(mac) = m.dst_mac {
            eth.val.dst_mac = mac;
            eth.mask.dst_mac = [0xff; 6];
        }
        if let Some(v) = m.vlan {
            eth.val.vlan_tag = (v & 0x0fff).to_be();
            eth.mask.vlan_tag = 0x0fffu16.to_be();
        }
        let l3 = m.ipv4_src.is_some() || m.ipv4_dst.is_some();
        let l4 = m.udp_src.is_some() || m.udp_dst.is_some();
        if l3 || l4 {
            eth.val.ether_type = 0x0800u16.to_be();
            eth.mask.ether_type = 0xffff;
        }
        let mut specs = 1u8;
        let mut body = Vec::new();
        push_struct(&mut body, &eth);
        if l3 || l4 {
            let mut ip = raw::ibv_flow_spec_ipv4 {
                type_: raw::IBV_FLOW_SPEC_IPV4,
                size: size_of::<raw::ibv_flow_spec_ipv4>() as u16,
                ..Default::default()
            };
            if let Some((a, k)) = m.ipv4_src {
                ip.val.src_ip = u32::from_ne_bytes(a);
                ip.mask.src_ip = u32::from_ne_bytes(k);
            }
            if let Some((a, k)) = m.ipv4_dst {
                ip.val.dst_ip = u32::from_ne_bytes(a);
                ip.mask.dst_ip = u32::from_ne_bytes(k);
            }
            push_struct(&mut body, &ip);
            specs += 1;
        }
        if l4 {
            let mut udp = raw::ibv_flow_spec_tcp_udp {
                type_: raw::IBV_FLOW_SPEC_UDP,
                size: size_of::<raw::ibv_flow_spec_tcp_udp>() as u16,
                ..Default::default()
            };
            if let Some((p, k)) = m.udp_src {
                udp.val.src_port = p.to_be();
                udp.mask.src_port = k.to_be();
            }
            if let Some((p, k)) = m.udp_dst {
                udp.val.dst_port = p.to_be();
                udp.mask.dst_port = k.to_be();
            }
            push_struct(&mut body, &udp);
            specs += 1;
        }
        let attr = raw::ibv_flow_attr {
            comp_mask: 0,
            type_: raw::IBV_FLOW_ATTR_NORMAL,
            size: (size_of::<raw::ibv_flow_attr>() + body.len()) as u16,
            priority,
            num_of_specs: specs,
            port,
            flags: 0,
        };
        let mut bytes = Vec::with_capacity(size_of::<raw::ibv_flow_attr>() + body.len() + 8);
        push_struct(&mut bytes, &attr);
        bytes.extend_from_slice(&body);
        FlowAttr { bytes, specs }
    }

    /// The bytes handed to `ibv_create_flow`.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Number of specs after the attribute.
    pub fn specs(&self) -> u8 {
        self.specs
    }

    /// The attribute header (decoded copy, for tests and logs).
    pub fn header(&self) -> raw::ibv_flow_attr {
        // SAFETY: bytes start with an ibv_flow_attr written by build; read unaligned.
        unsafe { std::ptr::read_unaligned(self.bytes.as_ptr().cast()) }
    }

    /// Spec `i` decoded as `T` (Ethernet, IPv4 or UDP, in build order), for tests.
    pub fn spec<T: Copy>(&self, i: usize) -> Option<T> {
        let mut off = size_of::<raw::ibv_flow_attr>();
        for _ in 0..i {
            let size = u16::from_ne_bytes([*self.bytes.get(off + 4)?, *self.bytes.get(off + 5)?]);
            off += usize::from(size);
        }
        if off + size_of::<T>() > self.bytes.len() {
            return None;
        }
        // SAFETY: in bounds (checked); T is plain data; read unaligned.
        Some(unsafe { std::ptr::read_unaligned(self.bytes.as_ptr().add(off).cast()) })
    }
}

/// A steering rule on a raw packet QP (`ibv_flow`), destroyed on drop.
pub struct Flow<'q> {
    ptr: NonNull<raw::ibv_flow>,
    _qp: &'q Qp,
}

// SAFETY: the handle is only destroyed (once) in Drop.
unsafe impl Send for Flow<'_> {}

impl<'q> Flow<'q> {
    /// Attaches `attr` to `qp`.
    ///
    /// # Errors
    /// `ibv_create_flow` failed (`EOPNOTSUPP`/`ENOSYS`: no flow steering on the device;
    /// `EPERM`: no `CAP_NET_RAW`; `EINVAL`: a spec the device cannot match).
    pub fn create(qp: &'q Qp, attr: &FlowAttr) -> Result<Flow<'q>> {
        let mut bytes = attr.bytes.clone();
        // SAFETY: bytes hold a complete ibv_flow_attr with its specs; the provider copies
        // what it needs during the call; qp is live.
        let p = unsafe { raw::rtdaq_ibv_create_flow(qp.as_raw(), bytes.as_mut_ptr().cast()) };
        Ok(Flow {
            ptr: non_null(p, "ibv_create_flow")?,
            _qp: qp,
        })
    }
}

impl Drop for Flow<'_> {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once while the QP lives (borrow).
        let rc = unsafe { raw::rtdaq_ibv_destroy_flow(self.ptr.as_ptr()) };
        debug_assert!(zero_or_errno(rc, "ibv_destroy_flow").is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_flow_has_eth_ipv4_udp_specs_in_network_order() {
        let m = FlowMatch {
            dst_mac: Some([2, 0, 0, 0, 0, 1]),
            vlan: Some(100),
            ipv4_dst: Some(([169, 254, 90, 2], [255, 255, 255, 255])),
            udp_dst: Some((5000, 0xffff)),
            ..Default::default()
        };
        let a = FlowAttr::build(&m, 1, 3);
        let h = a.header();
        assert_eq!((h.num_of_specs, h.port, h.priority), (3, 1, 3));
        assert_eq!(usize::from(h.size), a.bytes().len());
        assert_eq!(h.type_, raw::IBV_FLOW_ATTR_NORMAL);
        let eth: raw::ibv_flow_spec_eth = a.spec(0).unwrap();
        assert_eq!(eth.type_, raw::IBV_FLOW_SPEC_ETH);
        assert_eq!(eth.val.dst_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(u16::from_be(eth.val.vlan_tag), 100);
        assert_eq!(u16::from_be(eth.val.ether_type), 0x0800);
        let ip: raw::ibv_flow_spec_ipv4 = a.spec(1).unwrap();
        assert_eq!(ip.type_, raw::IBV_FLOW_SPEC_IPV4);
        assert_eq!(ip.val.dst_ip.to_ne_bytes(), [169, 254, 90, 2]);
        assert_eq!(ip.mask.src_ip, 0, "source unmatched");
        let udp: raw::ibv_flow_spec_tcp_udp = a.spec(2).unwrap();
        assert_eq!(udp.type_, raw::IBV_FLOW_SPEC_UDP);
        assert_eq!(u16::from_be(udp.val.dst_port), 5000);
        assert_eq!(udp.mask.src_port, 0);
    }

    #[test]
    fn mac_only_flow_has_one_spec_and_port_block_masks() {
        let a = FlowAttr::build(
            &FlowMatch {
                dst_mac: Some([2, 0, 0, 0, 0, 9]),
                ..Default::default()
            },
            2,
            0,
        );
        assert_eq!(a.specs(), 1);
        let eth: raw::ibv_flow_spec_eth = a.spec(0).unwrap();
        assert_eq!(eth.mask.ether_type, 0);
        assert!(a.spec::<raw::ibv_flow_spec_ipv4>(1).is_none());
        let b = FlowAttr::build(
            &FlowMatch {
                udp_src: Some((4096, 0xfff0)),
                ..Default::default()
            },
            1,
            0,
        );
        assert_eq!(b.specs(), 3, "UDP implies IPv4 and Ethernet type 0x0800");
        let udp: raw::ibv_flow_spec_tcp_udp = b.spec(2).unwrap();
        assert_eq!(u16::from_be(udp.mask.src_port), 0xfff0);
    }
}
