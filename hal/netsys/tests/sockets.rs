//! The shared socket plumbing on real kernel sockets: an IPv4 TCP connection over loopback
//! through `inet`, a UDP socket's options and `ppoll`, and (as root) an `AF_PACKET` socket
//! bound to `lo` whose `TPACKET_V3` ring is mapped with `SharedMap` and receives a datagram.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use rtdaq_netsys::{inet, map::SharedMap, netdev, packet, poll, sockopt};

#[test]
fn tcp_over_loopback_through_inet() {
    let l = inet::socket(inet::Kind::Stream).unwrap();
    inet::bind(l.as_fd(), SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
    inet::listen(l.as_fd(), 4).unwrap();
    let at = inet::local_addr(l.as_fd()).unwrap();
    assert_ne!(at.port(), 0);
    // Nothing pending: a non-blocking accept says EAGAIN.
    let e = inet::accept(l.as_fd()).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
    let c = inet::socket(inet::Kind::Stream).unwrap();
    match inet::connect(c.as_fd(), at) {
        Ok(()) => {}
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINPROGRESS)),
    }
    assert!(poll::poll_one(l.as_fd(), poll::POLLIN, Duration::from_secs(5)).unwrap());
    let (s, peer) = inet::accept(l.as_fd()).unwrap();
    assert_eq!(peer, inet::local_addr(c.as_fd()).unwrap());
    assert_eq!(inet::local_addr(s.as_fd()).unwrap(), at);
    inet::set_nonblocking(s.as_fd(), false).unwrap();
    // A second bind of the same port fails with the OS error.
    let d = inet::socket(inet::Kind::Stream).unwrap();
    let e = inet::bind(d.as_fd(), at).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
}

#[test]
fn udp_options_and_ppoll() {
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    sockopt::set_int(r.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1 << 20).unwrap();
    assert!(sockopt::get_int(r.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap() >= 1 << 20);
    let mut fds = [poll::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&r),
        events: poll::POLLIN,
        revents: 0,
    }];
    assert_eq!(
        poll::ppoll(&mut fds, Some(Duration::from_millis(1))).unwrap(),
        0
    );
    r.send_to(b"x", r.local_addr().unwrap()).unwrap();
    assert_eq!(
        poll::ppoll(&mut fds, Some(Duration::from_secs(5))).unwrap(),
        1
    );
    assert_ne!(fds[0].revents & poll::POLLIN, 0);
}

#[test]
fn packet_socket_ring_on_lo_receives_a_datagram() {
    if !rtdaq_testbed::require::need_root("an AF_PACKET socket (CAP_NET_RAW)") {
        return;
    }
    let p = packet::socket().unwrap();
    let fd = p.as_fd();
    let lo = netdev::index(fd, "lo").unwrap();
    sockopt::set_int(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        libc::tpacket_versions::TPACKET_V3 as i32,
    )
    .unwrap();
    let req = libc::tpacket_req3 {
        tp_block_size: 1 << 16,
        tp_block_nr: 4,
        tp_frame_size: 2048,
        tp_frame_nr: 4 * (1 << 16) / 2048,
        tp_retire_blk_tov: 1,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    sockopt::set(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).unwrap();
    let map = SharedMap::new(fd, 4 << 16, 0, false).unwrap();
    assert_eq!(map.len(), 4 << 16);
    packet::bind(fd, lo, libc::ETH_P_ALL as u16).unwrap();
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..3 {
        u.send_to(b"rtdaq-netsys", u.local_addr().unwrap()).unwrap();
    }
    // The first block is retired after at most 1 ms and handed to user space.
    assert!(poll::poll_one(fd, poll::POLLIN, Duration::from_secs(5)).unwrap());
    let (st, _) =
        sockopt::get::<libc::tpacket_stats_v3>(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS)
            .unwrap();
    assert!(st.tp_packets >= 3, "{}", st.tp_packets);
    let e = packet::bind(fd, 99_999, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
}
