//! Datagrams sent in batches: [`DatagramBatch`] keeps up to `cap` datagrams of at most
//! `stride` bytes in one preallocated buffer and sends them on a connected UDP socket with
//! one `sendmmsg` (the egress stage's sender). A **timed** batch
//! ([`DatagramBatch::timed`]) gives each datagram its departure time (`SCM_TXTIME`, for a
//! socket with `SO_TXTIME`: [`set_txtime`](crate::sockopt::set_txtime) or
//! [`txtime::arm`](crate::txtime::arm)): the `etf` or `fq` qdisc holds it until then. After
//! the constructor nothing allocates.

use std::io;
use std::os::fd::BorrowedFd;

/// A batch of datagrams (see the [module docs](self)).
pub struct DatagramBatch {
    buf: Box<[u8]>,
    stride: usize,
    lens: Box<[u32]>,
    /// Departure times, ns on the socket's `SO_TXTIME` clock (a timed batch; empty
    /// otherwise).
    at_ns: Box<[u64]>,
    n: usize,
    sent: usize,
    hdrs: crate::sys::MmsgHeaders,
}

impl DatagramBatch {
    /// Room for `cap` datagrams of up to `stride` bytes each.
    pub fn new(cap: usize, stride: usize) -> Self {
        Self::with(cap, stride, false)
    }

    /// A timed batch: each datagram goes with the departure time given to
    /// [`push_at`](Self::push_at).
    pub fn timed(cap: usize, stride: usize) -> Self {
        Self::with(cap, stride, true)
    }

    fn with(cap: usize, stride: usize, timed: bool) -> Self {
        let cap = cap.max(1);
        DatagramBatch {
            buf: vec![0u8; cap * stride].into_boxed_slice(),
            stride,
            lens: vec![0u32; cap].into_boxed_slice(),
            at_ns: vec![0u64; if timed { cap } else { 0 }].into_boxed_slice(),
            n: 0,
            sent: 0,
            hdrs: crate::sys::MmsgHeaders::new(cap, timed),
        }
    }

    /// Whether each datagram goes with a departure time.
    pub fn is_timed(&self) -> bool {
        !self.at_ns.is_empty()
    }

    /// The next free datagram's bytes (`stride` of them), or `None` when the batch is full.
    pub fn slot(&mut self) -> Option<&mut [u8]> {
        (self.n < self.lens.len()).then(|| {
            let at = self.n * self.stride;
            &mut self.buf[at..at + self.stride]
        })
    }

    /// Keeps the first `len` bytes of the datagram [`slot`](Self::slot) gave as the next
    /// one of the batch (ignored when the batch is full).
    pub fn push(&mut self, len: usize) {
        self.push_at(len, 0);
    }

    /// [`push`](Self::push) with the datagram's departure time, ns on the socket's
    /// `SO_TXTIME` clock (a timed batch; ignored otherwise).
    pub fn push_at(&mut self, len: usize, at_ns: u64) {
        if self.n < self.lens.len() {
            self.lens[self.n] = len.min(self.stride) as u32;
            if let Some(t) = self.at_ns.get_mut(self.n) {
                *t = at_ns;
            }
            self.n += 1;
        }
    }

    /// The departure time of the first datagram not sent yet (a timed batch with one).
    pub fn first_at(&self) -> Option<u64> {
        (self.sent < self.n)
            .then(|| self.at_ns.get(self.sent).copied())
            .flatten()
    }

    /// Datagrams in the batch not sent yet.
    pub fn pending(&self) -> usize {
        self.n - self.sent
    }

    /// Whether no more datagram fits.
    pub fn is_full(&self) -> bool {
        self.n == self.lens.len()
    }

    /// Bytes of the datagrams not sent yet.
    pub fn pending_bytes(&self) -> u64 {
        self.lens[self.sent..self.n]
            .iter()
            .map(|&l| u64::from(l))
            .sum()
    }

    /// Sends what is pending on the connected socket `fd`, from the first datagram not sent
    /// yet: how many the kernel took this call (a blocking socket takes all of them unless
    /// an error comes between). The batch empties once everything went.
    pub fn send(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        if self.pending() == 0 {
            self.clear();
            return Ok(0);
        }
        let from = self.sent * self.stride;
        let times = self.at_ns.get(self.sent..self.n).unwrap_or_default();
        let k = self.hdrs.send(
            fd,
            &self.buf[from..],
            self.stride,
            &self.lens[self.sent..self.n],
            times,
        )?;
        self.sent += k;
        if self.sent == self.n {
            self.clear();
        }
        Ok(k)
    }

    /// Drops every datagram of the batch (sent or not).
    pub fn clear(&mut self) {
        self.n = 0;
        self.sent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::DatagramBatch;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    /// Three datagrams of different lengths, in one sendmmsg, arrive whole and in order.
    #[test]
    fn a_batch_arrives_whole_and_in_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut b = DatagramBatch::new(3, 100);
        for (k, len) in [10usize, 100, 1].into_iter().enumerate() {
            let d = b.slot().unwrap();
            d[..len].fill(k as u8 + 1);
            b.push(len);
        }
        assert!(b.is_full() && b.slot().is_none());
        assert_eq!((b.pending(), b.pending_bytes()), (3, 111));
        assert_eq!(b.send(tx.as_fd()).unwrap(), 3);
        assert_eq!(b.pending(), 0);
        let mut got = [0u8; 200];
        for (k, len) in [10usize, 100, 1].into_iter().enumerate() {
            let n = rx.recv(&mut got).unwrap();
            assert_eq!(n, len);
            assert!(got[..n].iter().all(|&x| x == k as u8 + 1));
        }
    }

    /// A timed batch on a socket with `SO_TXTIME`: the kernel takes every datagram with
    /// its `SCM_TXTIME` (loopback has no `fq`, so they arrive at once, whole and in order);
    /// without `SO_TXTIME` the same control message is refused (`EINVAL`): it does reach
    /// the kernel.
    #[test]
    fn a_timed_batch_goes_with_its_departure_times() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut b = DatagramBatch::timed(4, 64);
        assert!(b.is_timed());
        let t0 = crate::clock::monotonic_ns();
        assert!(t0 > 0);
        for k in 0..4u8 {
            b.slot().unwrap()[..8].fill(k);
            b.push_at(8, t0 + u64::from(k) * 1000);
        }
        let refused = b.send(tx.as_fd()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
        crate::sockopt::set_txtime(tx.as_fd()).unwrap();
        assert_eq!(b.send(tx.as_fd()).unwrap(), 4);
        let mut got = [0u8; 64];
        for k in 0..4u8 {
            assert_eq!(rx.recv(&mut got).unwrap(), 8);
            assert_eq!(got[0], k);
        }
    }
}
