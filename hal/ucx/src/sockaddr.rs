//! `std::net::SocketAddr` ⇄ the C socket addresses UCX takes (`ucs_sock_addr_t`) and
//! returns (`struct sockaddr_storage` of `ucp_listener_query`).
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::raw;

/// A socket address in C layout, owned: the storage a `ucs_sock_addr_t` points into.
pub(crate) struct CSockAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl CSockAddr {
    /// The C form of `addr`.
    pub(crate) fn new(addr: &SocketAddr) -> CSockAddr {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (AF_UNSPEC) value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and as aligned as sockaddr_in
                // (the C socket API's contract); the write stays inside `storage`.
                unsafe {
                    std::ptr::write(
                        (&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(),
                        sin,
                    )
                };
                size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe {
                    std::ptr::write(
                        (&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
                        sin6,
                    )
                };
                size_of::<libc::sockaddr_in6>()
            }
        };
        CSockAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    /// The `ucs_sock_addr_t` UCX takes; valid while `self` lives (UCX copies the address
    /// in `ucp_ep_create` and `ucp_listener_create`).
    pub(crate) fn as_ucs(&self) -> raw::ucs_sock_addr_t {
        raw::ucs_sock_addr_t {
            addr: (&self.storage as *const libc::sockaddr_storage).cast::<raw::sockaddr>(),
            addrlen: self.len,
        }
    }
}

/// The `SocketAddr` in a `sockaddr_storage` UCX filled (`ucp_listener_query`); `None` for a
/// family other than IPv4 and IPv6.
pub(crate) fn from_storage(s: &raw::sockaddr_storage) -> Option<SocketAddr> {
    let p = (s as *const raw::sockaddr_storage).cast::<u8>();
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits in the
            // 128-byte storage; read_unaligned makes no alignment assumption.
            let sin: libc::sockaddr_in = unsafe { std::ptr::read_unaligned(p.cast()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: libc::sockaddr_in6 = unsafe { std::ptr::read_unaligned(p.cast()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(a: SocketAddr) -> Option<SocketAddr> {
        let c = CSockAddr::new(&a);
        let u = c.as_ucs();
        assert!(u.addrlen as usize <= size_of::<raw::sockaddr_storage>());
        // SAFETY: u.addr points at c.storage (128 bytes, alive); copy it into a bindgen
        // sockaddr_storage of the same size.
        let s: raw::sockaddr_storage = unsafe { std::ptr::read_unaligned(u.addr.cast()) };
        from_storage(&s)
    }

    #[test]
    fn v4_and_v6_round_trip() {
        for a in [
            "127.0.0.1:13337",
            "10.1.2.3:1",
            "0.0.0.0:0",
            "[::1]:4791",
            "[fe80::1%3]:65535",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(round_trip(a), Some(a));
        }
    }

    #[test]
    fn layout_is_the_kernels() {
        let a: SocketAddr = "192.0.2.7:4660".parse().unwrap();
        let c = CSockAddr::new(&a);
        assert_eq!(c.len as usize, 16);
        // SAFETY: storage is 128 plain bytes.
        let b: [u8; 8] = unsafe { std::ptr::read_unaligned(c.as_ucs().addr.cast()) };
        assert_eq!(&b[2..], &[0x12, 0x34, 192, 0, 2, 7]);
        assert_eq!(i32::from(u16::from_ne_bytes([b[0], b[1]])), libc::AF_INET);
    }
}
