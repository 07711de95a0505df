//! Parsers for the string-typed values: port ranges, IPv4 prefixes, socket URIs, PCI
//! addresses, netdev names, MAC addresses. Each returns the typed value or a message that
//! says what is wrong and what a correct value looks like.

use crate::model::{Address, PciAddress, SocketUri, Transport};
use crate::schema::IntOrStr;
use rtdaq_core::flow::{Ipv4Prefix, PortRange};
use std::net::Ipv4Addr;

/// Parses a UDP port match: an integer, `"5000"` or an inclusive range `"5000-5003"`.
/// Port 0 is rejected (it is not a wildcard: omit the key to match any port).
pub(crate) fn port_range(v: &IntOrStr) -> Result<PortRange, String> {
    match v {
        IntOrStr::Int(i) => {
            let p = port_number(*i)?;
            Ok(PortRange { lo: p, hi: p })
        }
        IntOrStr::Str(s) => {
            let t = s.trim();
            let (lo, hi) = match t.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (t, t),
            };
            let parse = |x: &str| -> Result<u16, String> {
                let n: i64 = x.parse().map_err(|_| {
                    format!(
                        "{s:?} is not a port or port range; write a number (5000) or \"lo-hi\" (\"5000-5003\")"
                    )
                })?;
                port_number(n)
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo > hi {
                return Err(format!(
                    "range {s:?} has lo {lo} > hi {hi}; write it as \"{hi}-{lo}\""
                ));
            }
            Ok(PortRange { lo, hi })
        }
    }
}

fn port_number(n: i64) -> Result<u16, String> {
    match n {
        0 => Err("port 0 is not a wildcard; remove the key to match any port".into()),
        1..=65535 => Ok(n as u16),
        _ => Err(format!("port {n} is out of range 1..=65535")),
    }
}

/// Parses an IPv4 address.
pub(crate) fn ipv4(s: &str) -> Result<Ipv4Addr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{s:?} is not an IPv4 address (write a.b.c.d, e.g. \"10.0.0.1\")"))
}

/// Parses `"a.b.c.d/len"` or a plain address (`/32`). Host bits past the prefix must be 0.
pub(crate) fn ipv4_prefix(s: &str) -> Result<Ipv4Prefix, String> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => {
            let len: u32 = l.trim().parse().map_err(|_| {
                format!("{s:?}: prefix length {l:?} is not a number; write \"a.b.c.d/len\" with len 0..=32")
            })?;
            (a, len)
        }
        None => (s, 32),
    };
    let ip = ipv4(addr)?;
    if len > 32 {
        return Err(format!(
            "{s:?}: prefix length {len} > 32; IPv4 prefixes are /0../32"
        ));
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    let bits = u32::from(ip);
    if bits & !mask != 0 {
        let net = Ipv4Addr::from(bits & mask);
        return Err(format!(
            "{s:?} has host bits set past /{len}; did you mean \"{net}/{len}\"?"
        ));
    }
    Ok(Ipv4Prefix {
        addr: ip.octets(),
        len: len as u8,
    })
}

/// Parses `udp://a.b.c.d:port` or `tcp://a.b.c.d:port` (port 1..=65535).
pub(crate) fn socket_uri(s: &str) -> Result<SocketUri, String> {
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(format!(
            "{s:?} is not a socket URI; write \"udp://a.b.c.d:port\" or \"tcp://a.b.c.d:port\""
        ));
    };
    let transport = match scheme {
        "udp" => Transport::Udp,
        "tcp" => Transport::Tcp,
        "rdma" => Transport::Rdma,
        "roce" => {
            return Err(format!(
                "{s:?}: write RDMA CM endpoints as \"rdma://a.b.c.d:port\" (engine.kind = \"ibverbs\", mode = \"roce\")"
            ))
        }
        other => {
            return Err(format!(
                "{s:?}: unknown scheme {other:?}; the socket engine speaks \"udp://\" and \"tcp://\""
            ))
        }
    };
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(format!(
            "{s:?} has no port; write \"{scheme}://{rest}:PORT\""
        ));
    };
    if port.contains('/') || port.contains('?') {
        return Err(format!(
            "{s:?}: paths and query strings are not supported; write \"{scheme}://a.b.c.d:port\""
        ));
    }
    let ip = ipv4(host)?;
    let port: i64 = port
        .parse()
        .map_err(|_| format!("{s:?}: port {port:?} is not a number"))?;
    let port = match port {
        1..=65535 => port as u16,
        _ => return Err(format!("{s:?}: port {port} is out of range 1..=65535")),
    };
    Ok(SocketUri {
        transport,
        ip,
        port,
    })
}

/// Parses a PCI address `dddd:bb:dd.f` (or the short `bb:dd.f`, domain 0), hexadecimal.
pub(crate) fn pci_bdf(s: &str) -> Result<PciAddress, String> {
    let bad = || {
        format!(
            "{s:?} is not a PCI address; write domain:bus:device.function in hex, e.g. \"0000:17:00.0\""
        )
    };
    let parts: Vec<&str> = s.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (*d, *b, *df),
        [b, df] => ("0", *b, *df),
        _ => return Err(bad()),
    };
    let (dev, func) = devfn.split_once('.').ok_or_else(bad)?;
    let hex = |x: &str, digits: usize| -> Result<u32, String> {
        if x.is_empty() || x.len() > digits || !x.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u32::from_str_radix(x, 16).map_err(|_| bad())
    };
    let domain = hex(domain, 4)?;
    let bus = hex(bus, 2)?;
    let device = hex(dev, 2)?;
    let function = hex(func, 1)?;
    if device > 0x1f {
        return Err(format!("{s:?}: PCI device {device:#x} > 0x1f"));
    }
    if function > 7 {
        return Err(format!("{s:?}: PCI function {function} > 7"));
    }
    Ok(PciAddress {
        domain: domain as u16,
        bus: bus as u8,
        device: device as u8,
        function: function as u8,
    })
}

/// Checks a Linux network device name (what the kernel's `dev_valid_name` accepts).
pub(crate) fn netdev(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("empty interface address; write a netdev name (\"eth0\"), a PCI address (\"0000:17:00.0\") or a socket URI (\"udp://127.0.0.1:5000\")".into());
    }
    if s.len() > 15 {
        return Err(format!(
            "{s:?} is {} bytes; Linux netdev names are at most 15",
            s.len()
        ));
    }
    if s == "." || s == ".." || s.chars().any(|c| c == '/' || c.is_whitespace()) {
        return Err(format!(
            "{s:?} is not a valid netdev name (no '/', no spaces, not \".\" or \"..\")"
        ));
    }
    Ok(s.to_owned())
}

/// Classifies and parses an interface address: a URI (contains `://`), a PCI address
/// (contains `:` and `.`), else a netdev name.
pub(crate) fn address(s: &str) -> Result<Address, String> {
    if s.contains("://") {
        return socket_uri(s).map(Address::Socket);
    }
    if mac(s).is_ok() {
        return Err(format!(
            "{s:?} is a MAC address; name the port by netdev (\"eth0\") or PCI address (\"0000:17:00.0\")"
        ));
    }
    if s.contains(':') {
        if let Some((host, _)) = s.rsplit_once(':') {
            if host.parse::<Ipv4Addr>().is_ok() {
                return Err(format!(
                    "{s:?} has no scheme; write \"udp://{s}\" or \"tcp://{s}\""
                ));
            }
        }
        return pci_bdf(s).map(Address::Pci);
    }
    if s.parse::<Ipv4Addr>().is_ok() {
        return Err(format!(
            "{s:?} is a bare IP address; write a socket URI \"udp://{s}:PORT\" (socket engine) or a netdev/PCI address (raw engines)"
        ));
    }
    netdev(s).map(Address::Netdev)
}

/// Parses a MAC address `aa:bb:cc:dd:ee:ff` (also `-` separated).
pub(crate) fn mac(s: &str) -> Result<[u8; 6], String> {
    let bad =
        || format!("{s:?} is not a MAC address; write six hex bytes, e.g. \"02:00:00:00:00:01\"");
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut out = [0u8; 6];
    for (o, p) in out.iter_mut().zip(&parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// True when `s` is a plain identifier: `[A-Za-z0-9_-]`, 1..=64 bytes.
pub(crate) fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> IntOrStr {
        IntOrStr::Str(x.into())
    }

    #[test]
    fn port_ranges() {
        assert_eq!(
            port_range(&IntOrStr::Int(5000)),
            Ok(PortRange { lo: 5000, hi: 5000 })
        );
        assert_eq!(port_range(&s("5000")), Ok(PortRange { lo: 5000, hi: 5000 }));
        assert_eq!(
            port_range(&s("5000-5003")),
            Ok(PortRange { lo: 5000, hi: 5003 })
        );
        assert_eq!(port_range(&s(" 1 - 2 ")), Ok(PortRange { lo: 1, hi: 2 }));
        assert!(port_range(&s("5003-5000"))
            .unwrap_err()
            .contains("lo 5003 > hi 5000"));
        assert!(port_range(&IntOrStr::Int(0))
            .unwrap_err()
            .contains("not a wildcard"));
        assert!(port_range(&IntOrStr::Int(70000))
            .unwrap_err()
            .contains("out of range"));
        assert!(port_range(&s("0-10")).is_err());
        assert!(port_range(&s("50x")).unwrap_err().contains("not a port"));
        assert!(port_range(&s("1-2-3")).is_err());
    }

    #[test]
    fn prefixes() {
        assert_eq!(
            ipv4_prefix("10.0.0.0/8"),
            Ok(Ipv4Prefix {
                addr: [10, 0, 0, 0],
                len: 8
            })
        );
        assert_eq!(
            ipv4_prefix("192.168.1.7"),
            Ok(Ipv4Prefix {
                addr: [192, 168, 1, 7],
                len: 32
            })
        );
        assert_eq!(ipv4_prefix("0.0.0.0/0").map(|p| p.len), Ok(0));
        assert!(ipv4_prefix("10.0.0.0/33").unwrap_err().contains("> 32"));
        assert!(ipv4_prefix("10.0.0.1/24")
            .unwrap_err()
            .contains("did you mean \"10.0.0.0/24\""));
        assert!(ipv4_prefix("10.0.0/8").is_err());
        assert!(ipv4_prefix("10.0.0.0/x").is_err());
        assert!(ipv4_prefix("300.0.0.0").is_err());
    }

    #[test]
    fn uris() {
        let u = socket_uri("udp://127.0.0.1:5000").unwrap();
        assert_eq!((u.transport, u.port), (Transport::Udp, 5000));
        assert_eq!(u.to_string(), "udp://127.0.0.1:5000");
        assert_eq!(
            socket_uri("tcp://0.0.0.0:6000").unwrap().transport,
            Transport::Tcp
        );
        assert!(socket_uri("udp://127.0.0.1")
            .unwrap_err()
            .contains("no port"));
        assert!(socket_uri("udp://127.0.0.1:0")
            .unwrap_err()
            .contains("out of range"));
        assert!(socket_uri("http://1.2.3.4:80")
            .unwrap_err()
            .contains("unknown scheme"));
        assert!(socket_uri("roce://1.2.3.4:80")
            .unwrap_err()
            .contains("ibverbs"));
        assert!(socket_uri("udp://host:80")
            .unwrap_err()
            .contains("not an IPv4"));
        assert!(socket_uri("udp://1.2.3.4:80/x").is_err());
        assert!(socket_uri("127.0.0.1:80").is_err());
    }

    #[test]
    fn bdfs() {
        let p = pci_bdf("0000:17:00.0").unwrap();
        assert_eq!((p.domain, p.bus, p.device, p.function), (0, 0x17, 0, 0));
        assert_eq!(p.to_string(), "0000:17:00.0");
        assert_eq!(pci_bdf("af:1f.7").unwrap().to_string(), "0000:af:1f.7");
        assert!(pci_bdf("0000:17:20.0").unwrap_err().contains("> 0x1f"));
        assert!(pci_bdf("0000:17:00.8").unwrap_err().contains("> 7"));
        assert!(pci_bdf("0000:g7:00.0").is_err());
        assert!(pci_bdf("00000:17:00.0").is_err());
        assert!(pci_bdf("0000:17:00").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(address("eth0"), Ok(Address::Netdev("eth0".into())));
        assert!(matches!(address("0000:17:00.0"), Ok(Address::Pci(_))));
        assert!(matches!(
            address("udp://127.0.0.1:5000"),
            Ok(Address::Socket(_))
        ));
        assert!(address("aa:bb:cc:dd:ee:ff").unwrap_err().contains("MAC"));
        assert!(address("127.0.0.1:5000").unwrap_err().contains("no scheme"));
        assert!(address("10.0.0.1").unwrap_err().contains("bare IP"));
        assert!(address("").is_err());
        assert!(address("a-very-long-netdev-name")
            .unwrap_err()
            .contains("at most 15"));
        assert!(address("eth 0").is_err());
    }

    #[test]
    fn macs() {
        assert_eq!(mac("02:00:00:00:00:01"), Ok([2, 0, 0, 0, 0, 1]));
        assert_eq!(
            mac("AA-bb-cc-dd-ee-ff"),
            Ok([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        );
        assert!(mac("02:00:00:00:00").is_err());
        assert!(mac("02:00:00:00:00:1").is_err());
        assert!(mac("zz:00:00:00:00:01").is_err());
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("cpu_rx-0"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a b"));
    }
}
