//! Is this host's clock synchronised? linuxptp's `ptp4l`, asked over its management socket
//! (its `uds_address`, `/var/run/ptp4l` by default) as `pmc -u -b 0` asks it: `GET
//! PORT_DATA_SET` (each port's state: SLAVE once it follows a master) and `GET
//! TIME_STATUS_NP` (the last offset from the master, and whether there is a grandmaster).
//!
//! The messages are IEEE 1588 management messages (`messageType` 0xD, a MANAGEMENT TLV
//! with the `managementId`), carried in Unix datagrams; the answers come back to this
//! client's socket, a file in a private temporary directory (the tempfile crate) removed on drop (`ptp4l` does not
//! answer an abstract address). Written here, not by running `pmc`: a run asks once a
//! second and must not depend on a program's output format.

use crate::error::{PlatformError, Result};
use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `PORT_DATA_SET` (IEEE 1588 table 40).
const PORT_DATA_SET: u16 = 0x2004;
/// linuxptp's `TIME_STATUS_NP`.
const TIME_STATUS_NP: u16 = 0xC000;
/// The MANAGEMENT TLV type.
const TLV_MANAGEMENT: u16 = 0x0001;
/// The MANAGEMENT_ERROR_STATUS TLV type.
const TLV_ERROR: u16 = 0x0002;
/// Bytes of the common header.
const HEADER: usize = 34;
/// Bytes of the management fields after it (target port, hops, action, reserved).
const MGMT: usize = 14;

/// A PTP port's state (IEEE 1588 `portState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// 1
    Initializing,
    /// 2
    Faulty,
    /// 3
    Disabled,
    /// 4: no master heard yet, or the master went quiet.
    Listening,
    /// 5
    PreMaster,
    /// 6: this port is a master (this host is the time source on that link).
    Master,
    /// 7
    Passive,
    /// 8: following a master, servo not locked yet.
    Uncalibrated,
    /// 9: following a master, servo locked.
    Slave,
    /// Any other value.
    Other(u8),
}

impl PortState {
    fn from_u8(v: u8) -> PortState {
        use PortState::*;
        match v {
            1 => Initializing,
            2 => Faulty,
            3 => Disabled,
            4 => Listening,
            5 => PreMaster,
            6 => Master,
            7 => Passive,
            8 => Uncalibrated,
            9 => Slave,
            o => Other(o),
        }
    }

    /// The name `pmc` prints (`SLAVE`, `LISTENING`, ...).
    pub fn name(self) -> &'static str {
        use PortState::*;
        match self {
            Initializing => "INITIALIZING",
            Faulty => "FAULTY",
            Disabled => "DISABLED",
            Listening => "LISTENING",
            PreMaster => "PRE_MASTER",
            Master => "MASTER",
            Passive => "PASSIVE",
            Uncalibrated => "UNCALIBRATED",
            Slave => "SLAVE",
            Other(_) => "UNKNOWN",
        }
    }

    /// The state's number (`portState`).
    pub fn code(self) -> u8 {
        use PortState::*;
        match self {
            Initializing => 1,
            Faulty => 2,
            Disabled => 3,
            Listening => 4,
            PreMaster => 5,
            Master => 6,
            Passive => 7,
            Uncalibrated => 8,
            Slave => 9,
            Other(o) => o,
        }
    }
}

/// What `ptp4l` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtpStatus {
    /// The best state of its ports (SLAVE over UNCALIBRATED over the others): the one that
    /// says whether this clock follows a master.
    pub port_state: PortState,
    /// The last offset from the master (ns): this clock minus the master's.
    pub offset_ns: i64,
    /// Whether it knows a grandmaster.
    pub gm_present: bool,
}

impl PtpStatus {
    /// Synchronised: a port follows a master with its servo locked (SLAVE) and the offset
    /// is within `max_offset_ns`.
    pub fn synchronised(&self, max_offset_ns: u64) -> bool {
        self.port_state == PortState::Slave && self.offset_ns.unsigned_abs() <= max_offset_ns
    }
}

impl std::fmt::Display for PtpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "port {}, offset from master {} ns, grandmaster {}",
            self.port_state.name(),
            self.offset_ns,
            if self.gm_present { "present" } else { "none" }
        )
    }
}

/// A management client of one `ptp4l`.
pub struct Ptp4l {
    sock: UnixDatagram,
    /// The private directory of this client's socket file (removed on drop).
    _dir: tempfile::TempDir,
    server: PathBuf,
    domain: u8,
    seq: u16,
}

impl Ptp4l {
    /// A client of the `ptp4l` whose management socket is `server`, in PTP domain `domain`
    /// (its `domainNumber`).
    pub fn new(server: &Path, domain: u8) -> Result<Ptp4l> {
        let err = |source| PlatformError::Ptp {
            socket: server.to_path_buf(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix("rtdaq-ptp")
            .tempdir()
            .map_err(err)?;
        let sock = UnixDatagram::bind(dir.path().join("sock")).map_err(err)?;
        Ok(Ptp4l {
            sock,
            _dir: dir,
            server: server.to_path_buf(),
            domain,
            seq: 0,
        })
    }

    /// Asks for the ports' states and the time status; waits at most `timeout` for the
    /// answers. An error names the socket: no `ptp4l` there, or none answered in time.
    pub fn status(&mut self, timeout: Duration) -> Result<PtpStatus> {
        let err = |source| PlatformError::Ptp {
            socket: self.server.clone(),
            source,
        };
        self.drain().map_err(err)?;
        for id in [PORT_DATA_SET, TIME_STATUS_NP] {
            let msg = get_message(id, self.domain, self.seq);
            self.seq = self.seq.wrapping_add(1);
            self.sock.send_to(&msg, &self.server).map_err(err)?;
        }
        let deadline = Instant::now() + timeout;
        let (mut state, mut time) = (None::<PortState>, None::<(i64, bool)>);
        let mut buf = [0u8; 1024];
        // Every port answers PORT_DATA_SET; after TIME_STATUS_NP the last of them is in.
        while time.is_none() || state.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "ptp4l did not answer in time",
                )));
            }
            self.sock.set_read_timeout(Some(left)).map_err(err)?;
            let n = match self.sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(err(e)),
            };
            match parse_response(&buf[..n]) {
                Some(Answer::Port(s)) => {
                    state = Some(state.map_or(s, |old| best(old, s)));
                }
                Some(Answer::Time(offset, gm)) => time = Some((offset, gm)),
                Some(Answer::Error(id)) => {
                    return Err(err(io::Error::other(format!(
                        "ptp4l refused management id {id:#06x}"
                    ))))
                }
                None => {}
            }
        }
        let (offset_ns, gm_present) = time.unwrap_or_default();
        Ok(PtpStatus {
            port_state: state.unwrap_or(PortState::Other(0)),
            offset_ns,
            gm_present,
        })
    }
}

impl Ptp4l {
    /// Drops answers left from an earlier question that timed out, so that they are not
    /// taken for this one's.
    fn drain(&self) -> io::Result<()> {
        self.sock.set_nonblocking(true)?;
        let mut buf = [0u8; 1024];
        while self.sock.recv(&mut buf).is_ok() {}
        self.sock.set_nonblocking(false)
    }
}

/// Of two ports' states, the one that says more about following a master.
fn best(a: PortState, b: PortState) -> PortState {
    let rank = |s| match s {
        PortState::Slave => 2,
        PortState::Uncalibrated => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Bytes of `id`'s data: a GET carries that many zero bytes, as `pmc` sends it (`ptp4l`
/// answers in place of them).
fn data_len(id: u16) -> usize {
    match id {
        PORT_DATA_SET => 26,
        TIME_STATUS_NP => 50,
        _ => 0,
    }
}

/// A management GET of `id` to every port (`pmc -b 0`).
fn get_message(id: u16, domain: u8, seq: u16) -> Vec<u8> {
    let len = HEADER + MGMT + 6 + data_len(id);
    let mut m = vec![0u8; len];
    m[0] = 0x0d; // management
    m[1] = 0x02; // PTP version 2
    m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    m[4] = domain;
    // sourcePortIdentity (20..30): this client's; a port number from the process id.
    m[28..30].copy_from_slice(&(std::process::id() as u16).to_be_bytes());
    m[30..32].copy_from_slice(&seq.to_be_bytes());
    m[32] = 0x04; // controlField: management
    m[33] = 0x7f; // logMessageInterval
    let b = HEADER;
    m[b..b + 10].fill(0xff); // targetPortIdentity: all clocks, all ports
                             // startingBoundaryHops, boundaryHops: 0 (this host's ptp4l only); action GET = 0.
    let t = b + MGMT;
    m[t..t + 2].copy_from_slice(&TLV_MANAGEMENT.to_be_bytes());
    m[t + 2..t + 4].copy_from_slice(&(2 + data_len(id) as u16).to_be_bytes());
    m[t + 4..t + 6].copy_from_slice(&id.to_be_bytes());
    m
}

/// One answer of `ptp4l`.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// A port's state (`PORT_DATA_SET`).
    Port(PortState),
    /// The offset from the master and whether a grandmaster is known (`TIME_STATUS_NP`).
    Time(i64, bool),
    /// A management error status for this id.
    Error(u16),
}

/// Reads a management RESPONSE; `None` for anything else.
fn parse_response(m: &[u8]) -> Option<Answer> {
    if m.len() < HEADER + MGMT + 6 || m[0] & 0x0f != 0x0d || m[HEADER + 12] & 0x0f != 2 {
        return None;
    }
    let t = HEADER + MGMT;
    let be16 = |i: usize| u16::from_be_bytes([m[i], m[i + 1]]);
    let (tlv, id) = (be16(t), be16(t + 4));
    let data = m.get(t + 6..)?;
    match (tlv, id) {
        (TLV_ERROR, _) => Some(Answer::Error(be16(t + 6))),
        (TLV_MANAGEMENT, PORT_DATA_SET) => Some(Answer::Port(PortState::from_u8(*data.get(10)?))),
        (TLV_MANAGEMENT, TIME_STATUS_NP) => {
            let offset = i64::from_be_bytes(data.get(0..8)?.try_into().ok()?);
            // master_offset 8, ingress_time 8, cumulativeScaledRateOffset 4,
            // scaledLastGmPhaseChange 4, gmTimeBaseIndicator 2, lastGmPhaseChange 12,
            // gmPresent 4.
            let gm = i32::from_be_bytes(data.get(38..42)?.try_into().ok()?) != 0;
            Some(Answer::Time(offset, gm))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RESPONSE as ptp4l builds it: the request with action RESPONSE and `data`.
    fn response(id: u16, data: &[u8]) -> Vec<u8> {
        let mut m = get_message(id, 0, 7);
        m.truncate(HEADER + MGMT + 6);
        m[HEADER + 12] = 2;
        let t = HEADER + MGMT;
        m[t + 2..t + 4].copy_from_slice(&(2 + data.len() as u16).to_be_bytes());
        m.extend_from_slice(data);
        m
    }

    #[test]
    fn a_get_is_a_management_message_to_every_port() {
        // As pmc sends it (strace of `pmc -u -b 0 'GET TIME_STATUS_NP'`): 104 bytes, the
        // TLV with the id's 50 data bytes zeroed.
        let m = get_message(TIME_STATUS_NP, 3, 0x0102);
        assert_eq!(m.len(), 104);
        assert_eq!(&m[..6], &[0x0d, 0x02, 0, 104, 3, 0]);
        assert_eq!(&m[30..34], &[0x01, 0x02, 0x04, 0x7f]);
        assert_eq!(&m[34..44], &[0xff; 10]);
        assert_eq!(&m[44..54], &[0, 0, 0, 0, 0, 1, 0, 0x34, 0xc0, 0x00]);
        assert!(m[54..].iter().all(|&b| b == 0));
        assert_eq!(get_message(PORT_DATA_SET, 0, 0).len(), 80);
    }

    #[test]
    fn answers_are_read_as_ptp4l_writes_them() {
        let mut port = [0u8; 26];
        port[10] = 9;
        assert_eq!(
            parse_response(&response(PORT_DATA_SET, &port)),
            Some(Answer::Port(PortState::Slave))
        );
        let mut time = [0u8; 50];
        time[..8].copy_from_slice(&(-76i64).to_be_bytes());
        time[38..42].copy_from_slice(&1i32.to_be_bytes());
        assert_eq!(
            parse_response(&response(TIME_STATUS_NP, &time)),
            Some(Answer::Time(-76, true))
        );
        // A GET (not a response) and a short datagram are not answers.
        assert_eq!(parse_response(&get_message(PORT_DATA_SET, 0, 0)), None);
        assert_eq!(parse_response(&[0x0d; 10]), None);
        let mut e = response(TIME_STATUS_NP, &[0x00, 0x02, 0, 0]);
        let t = HEADER + MGMT;
        e[t..t + 2].copy_from_slice(&TLV_ERROR.to_be_bytes());
        assert_eq!(parse_response(&e), Some(Answer::Error(0x0002)));
    }

    #[test]
    fn synchronised_means_slave_within_the_offset() {
        let s = |port_state, offset_ns| PtpStatus {
            port_state,
            offset_ns,
            gm_present: true,
        };
        assert!(s(PortState::Slave, -900).synchronised(1000));
        assert!(!s(PortState::Slave, 1001).synchronised(1000));
        assert!(!s(PortState::Uncalibrated, 0).synchronised(1000));
        assert!(!s(PortState::Master, 0).synchronised(1000));
        assert_eq!(best(PortState::Master, PortState::Slave), PortState::Slave);
    }

    #[test]
    fn no_ptp4l_is_an_error_naming_the_socket() {
        let dir = Path::new("/nonexistent/rtdaq/ptp4l");
        let mut c = Ptp4l::new(dir, 0).unwrap();
        let e = c.status(Duration::from_millis(50)).unwrap_err().to_string();
        assert!(e.contains(&dir.display().to_string()), "{e}");
    }
}
