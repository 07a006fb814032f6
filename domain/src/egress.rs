//! Where the server may connect on a tenant's behalf. A tenant can make the portal send requests
//! (a team's webhooks); those must never reach inside the operator's network. This module holds
//! the rule, as pure functions over addresses: which addresses are the operator's own (loopback,
//! link-local, private, shared, multicast, unspecified, in every notation an address can take)
//! and the networks an operator allows although they are (`TENANTRY_WEBHOOK_ALLOW_NETWORKS`).
//! The engine applies it to the address a delivery actually connects to, after name resolution.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A CIDR network, `10.0.0.0/8` or `fd00::/8` (a bare address is its own /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Whether `ip` lies in the network (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => same_prefix(&net.octets(), &ip.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => same_prefix(&net.octets(), &ip.octets(), self.prefix),
            _ => false,
        }
    }
}

fn same_prefix(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let (whole, rest) = (usize::from(prefix / 8), prefix % 8);
    a[..whole] == b[..whole] && (rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0)
}

impl FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Network, String> {
        let s = s.trim();
        let (addr, prefix) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr =
            addr.parse().map_err(|_| format!("`{s}` is not a network: write it as 10.0.0.0/8 or fd00::/8"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{s}`: the prefix length must be a number from 0 to {max}"))?,
        };
        Ok(Network { addr: canonical(addr), prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Parses a comma-separated list of networks (an empty string is an empty list).
pub fn parse_networks(list: &str) -> Result<Vec<Network>, String> {
    list.split(',').filter(|s| !s.trim().is_empty()).map(str::parse).collect()
}

/// An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`) is judged as that IPv4 address: each is a
/// way to reach it.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !matches!(u32::from(low), 0 | 1) {
        return IpAddr::V4(low);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return IpAddr::V4(low);
    }
    if s[0] == 0x2002 {
        return IpAddr::V4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    ip
}

/// Why an address is the operator's own and no webhook may reach it, or `None` for an address
/// on the public internet. The rule's name is what a lead reads in the refusal.
pub fn reserved(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => reserved_v4(v4),
        IpAddr::V6(v6) => reserved_v6(v6),
    }
}

fn reserved_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(if ip.is_unspecified() || a == 0 {
        "unspecified (0.0.0.0/8)"
    } else if ip.is_loopback() {
        "loopback (127.0.0.0/8)"
    } else if ip.is_link_local() {
        "link-local (169.254.0.0/16, cloud metadata included)"
    } else if ip.is_private() {
        "private (RFC 1918: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)"
    } else if a == 100 && (64..128).contains(&b) {
        "shared address space (100.64.0.0/10)"
    } else if ip.is_multicast() {
        "multicast (224.0.0.0/4)"
    } else if a >= 240 {
        "reserved or broadcast (240.0.0.0/4)"
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        "IETF protocol assignments (192.0.0.0/24)"
    } else if a == 198 && (b == 18 || b == 19) {
        "benchmarking (198.18.0.0/15)"
    } else {
        return None;
    })
}

fn reserved_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(if ip.is_unspecified() {
        "unspecified (::)"
    } else if ip.is_loopback() {
        "loopback (::1)"
    } else if first & 0xffc0 == 0xfe80 {
        "link-local (fe80::/10)"
    } else if first & 0xffc0 == 0xfec0 {
        "site-local (fec0::/10)"
    } else if first & 0xfe00 == 0xfc00 {
        "unique-local (fc00::/7)"
    } else if ip.is_multicast() {
        "multicast (ff00::/8)"
    } else {
        return None;
    })
}

/// The rule applied to every address a tenant's request would connect to: reserved addresses are
/// refused unless an operator allowed their network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Egress {
    pub allowed: Vec<Network>,
}

/// An address a tenant's request may not reach, and the rule that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub address: IpAddr,
    pub rule: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is a {} address, inside the operator's network, which webhooks may not reach (an operator can allow \
             its network in TENANTRY_WEBHOOK_ALLOW_NETWORKS)",
            self.address, self.rule
        )
    }
}

impl Egress {
    /// Refuses `ip` when it is reserved and in no allowed network.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        match reserved(ip) {
            Some(rule) if !self.allowed.iter().any(|n| n.contains(ip)) => Err(Refused { address: ip, rule }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_operators_own_addresses_are_reserved_in_every_notation() {
        for (addr, rule) in [
            ("127.0.0.1", "loopback"),
            ("127.255.1.2", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::7f00:1", "loopback"),
            ("2002:7f00:1::", "loopback"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("::ffff:169.254.169.254", "link-local"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("::ffff:10.0.0.1", "private"),
            ("fd12:3456::1", "unique-local"),
            ("fc00::1", "unique-local"),
            ("100.64.0.1", "shared"),
            ("100.127.255.255", "shared"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("255.255.255.255", "broadcast"),
        ] {
            let why = reserved(ip(addr)).unwrap_or_else(|| panic!("{addr} must be reserved"));
            assert!(why.starts_with(rule) || why.contains(rule), "{addr}: {why}");
        }
    }

    #[test]
    fn public_addresses_are_not() {
        for addr in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"] {
            assert_eq!(reserved(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn an_allowed_network_lets_its_addresses_through_and_no_others() {
        let egress = Egress { allowed: parse_networks("127.0.0.0/8, 10.20.0.0/16").unwrap() };
        assert_eq!(egress.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(egress.check(ip("::ffff:127.0.0.1")), Ok(()), "the mapped form is the same address");
        assert_eq!(egress.check(ip("10.20.5.5")), Ok(()));
        let refused = egress.check(ip("10.21.0.1")).unwrap_err();
        assert!(refused.to_string().contains("private"), "{refused}");
        assert!(refused.to_string().contains("TENANTRY_WEBHOOK_ALLOW_NETWORKS"));
        assert!(egress.check(ip("::1")).is_err(), "127.0.0.0/8 does not allow IPv6 loopback");
        assert!(Egress::default().check(ip("127.0.0.1")).is_err());
    }

    #[test]
    fn networks_parse_with_clear_errors() {
        assert_eq!(parse_networks("").unwrap(), vec![]);
        assert_eq!(parse_networks("192.168.1.7").unwrap()[0].to_string(), "192.168.1.7/32");
        assert!(parse_networks("fd00::/8").unwrap()[0].contains(ip("fd00::1")));
        assert!(!parse_networks("fd00::/8").unwrap()[0].contains(ip("fe00::1")));
        assert!(parse_networks("10.0.0.0/33").unwrap_err().contains("0 to 32"));
        assert!(parse_networks("intranet").unwrap_err().contains("10.0.0.0/8"));
        assert!(parse_networks("0.0.0.0/0").unwrap()[0].contains(ip("127.0.0.1")), "an operator may allow all");
    }
}
