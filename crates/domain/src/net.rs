//! Which network addresses a webhook may reach.
//!
//! A webhook URL comes from a customer, and the service that posts to it sits inside a
//! private network. Without these rules a webhook is a way to make the service send
//! requests to its own database, cloud metadata endpoint or admin pages (SSRF).
//! The same rules run at creation (on IP literals and reserved names) and at delivery
//! (on every address a name resolves to).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// Whether webhooks may target loopback and private addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TargetPolicy {
    /// Production: only public addresses.
    #[default]
    PublicOnly,
    /// Tests and development (`HOOKLINE_ALLOW_PRIVATE_TARGETS=true`).
    AllowPrivate,
}

impl TargetPolicy {
    /// Refuses an address in a reserved range, naming the range.
    pub fn check_ip(self, ip: IpAddr) -> Result<()> {
        match (self, reserved_range(ip)) {
            (TargetPolicy::PublicOnly, Some(range)) => Err(Error::invalid(
                "url",
                format!("{ip} is a {range} address; webhooks must target a public address"),
            )),
            _ => Ok(()),
        }
    }

    /// Refuses names that only ever mean a local or internal host.
    pub(crate) fn check_domain(self, domain: &str) -> Result<()> {
        let name = domain.strip_suffix('.').unwrap_or(domain);
        let reserved = name == "localhost"
            || [".localhost", ".local", ".internal"]
                .iter()
                .any(|suffix| name.ends_with(suffix));
        if self == TargetPolicy::PublicOnly && reserved {
            return Err(Error::invalid(
                "url",
                format!(
                    "`{domain}` names a local or internal host; webhooks must target a public host"
                ),
            ));
        }
        Ok(())
    }
}

/// The kind of reserved range `ip` falls in, or `None` for a public unicast address.
///
/// IPv6 addresses that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) are judged by
/// the IPv4 address they carry, so `::ffff:127.0.0.1` is loopback.
pub fn reserved_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => reserved_v4(v4),
        IpAddr::V6(v6) => reserved_v6(v6),
    }
}

const RESERVED_V4: &[([u8; 4], u8, &str)] = &[
    ([255, 255, 255, 255], 32, "broadcast"),
    ([0, 0, 0, 0], 8, "unspecified"),
    ([10, 0, 0, 0], 8, "private"),
    ([100, 64, 0, 0], 10, "carrier-grade NAT"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "reserved (IETF protocol assignments)"),
    ([192, 0, 2, 0], 24, "documentation"),
    ([192, 88, 99, 0], 24, "reserved (6to4 relay)"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "reserved (benchmarking)"),
    ([198, 51, 100, 0], 24, "documentation"),
    ([203, 0, 113, 0], 24, "documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
];

fn reserved_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    RESERVED_V4
        .iter()
        .find(|(network, len, _)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
            bits & mask == u32::from_be_bytes(*network)
        })
        .map(|(_, _, range)| *range)
}

const RESERVED_V6: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0, 96, "reserved (IPv4-compatible)"),
    (0x0064_ff9b_0001 << 80, 48, "reserved (local NAT64)"),
    (0x0100 << 112, 64, "reserved (discard)"),
    (0x2001_0db8 << 96, 32, "documentation"),
    (0x2001 << 112, 23, "reserved (IETF protocol assignments)"),
    (0x3fff << 112, 20, "documentation"),
    (0x5f00 << 112, 16, "reserved (SRv6)"),
    (0xfc00 << 112, 7, "private (unique local)"),
    (0xfe80 << 112, 10, "link-local"),
    (0xfec0 << 112, 10, "site-local"),
    (0xff00 << 112, 8, "multicast"),
];

fn reserved_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    let in_net = |network: u128, len: u8| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        bits & mask == network
    };
    // Addresses that carry an IPv4 address are as reserved as the address they carry.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return reserved_v4(v4);
    }
    if in_net(0x0064_ff9b << 96, 96) {
        return reserved_v4(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    if in_net(0x2002 << 112, 16) {
        return reserved_v4(Ipv4Addr::from((bits >> 80) as u32));
    }
    if let Some((_, _, range)) = RESERVED_V6.iter().find(|(net, len, _)| in_net(*net, *len)) {
        return Some(range);
    }
    // Everything outside global unicast (2000::/3) is unassigned or special.
    if !in_net(0x2000 << 112, 3) {
        return Some("reserved");
    }
    None
}

/// Parses an IPv4 host the way browsers and the WHATWG URL standard do, so that every
/// spelling of an address is recognised: `127.0.0.1`, `2130706433`, `0x7f000001`,
/// `0177.0.0.1`, `127.1`. Returns `None` for a host that is not a number.
///
/// This matters because resolvers (`getaddrinfo`) accept the same spellings: a check
/// that only knew dotted decimal could be walked around.
pub(crate) fn parse_ipv4_any_spelling(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|part| parse_ipv4_number(part))
        .collect::<Option<Vec<u64>>>()?;
    let (last, leading) = numbers.split_last()?;
    if leading.iter().any(|&n| n > 255) {
        return None;
    }
    let last_bits = 8 * (5 - numbers.len() as u32);
    if *last >= 1u64 << last_bits {
        return None;
    }
    let mut address = *last;
    for (i, n) in leading.iter().enumerate() {
        address += n << (8 * (3 - i));
    }
    Some(Ipv4Addr::from(u32::try_from(address).ok()?))
}

fn parse_ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // "0x" alone is zero; an empty part ("1..2") is not a number.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Whether the URL standard would read `host` as an IPv4 address: its last label is
/// a number. Such a host must then parse as one, or it is invalid.
pub(crate) fn ends_in_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or(host);
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || last
                .strip_prefix("0x")
                .or_else(|| last.strip_prefix("0X"))
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Option<Ipv4Addr> {
        parse_ipv4_any_spelling(s)
    }

    #[test]
    fn parses_every_ipv4_spelling() {
        let loopback = Some(Ipv4Addr::new(127, 0, 0, 1));
        for spelling in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0X7F000001",
            "0177.0.0.1",
            "0177.0.0.01",
            "127.1",
            "127.0.1",
            "0x7f.1",
            "0x7f.0.0.0x1",
            "017700000001",
            "127.0.0.1.",
        ] {
            assert_eq!(v4(spelling), loopback, "{spelling}");
        }
        assert_eq!(v4("0"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(v4("0x"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(v4("4294967295"), Some(Ipv4Addr::BROADCAST));
        for invalid in [
            "4294967296",
            "256.0.0.1",
            "1.2.3.4.5",
            "1..2",
            "08.0.0.1",
            "0x1g",
            "",
            "1.2.3.256",
        ] {
            assert_eq!(v4(invalid), None, "{invalid}");
        }
    }

    #[test]
    fn spots_hosts_that_end_in_a_number() {
        assert!(ends_in_number("2130706433"));
        assert!(ends_in_number("foo.0x7f"));
        assert!(ends_in_number("1.2.3.4."));
        assert!(!ends_in_number("example.com"));
        assert!(!ends_in_number("1.2.3.com"));
        assert!(!ends_in_number("0xzz"));
    }

    #[test]
    fn classifies_reserved_ipv4_ranges() {
        for (ip, range) in [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.1.2.3", "private"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("100.127.255.255", "carrier-grade NAT"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "reserved (IETF protocol assignments)"),
            ("192.0.2.1", "documentation"),
            ("192.88.99.1", "reserved (6to4 relay)"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "reserved (benchmarking)"),
            ("198.19.255.255", "reserved (benchmarking)"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "broadcast"),
        ] {
            assert_eq!(reserved_range(ip.parse().unwrap()), Some(range), "{ip}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.255",
        ] {
            assert_eq!(reserved_range(public.parse().unwrap()), None, "{public}");
        }
    }

    #[test]
    fn classifies_reserved_ipv6_ranges() {
        for ip in [
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::",
            "2002:a00:1::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff05::2",
            "4000::1",
            "::2",
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert!(reserved_range(addr).is_some(), "{ip} passed as public");
        }
        for public in [
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
        ] {
            let addr: IpAddr = public.parse().unwrap();
            assert_eq!(reserved_range(addr), None, "{public}");
        }
    }

    #[test]
    fn policy_refuses_or_allows() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let err = TargetPolicy::PublicOnly
            .check_ip(lo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("loopback"), "{err}");
        assert!(TargetPolicy::AllowPrivate.check_ip(lo).is_ok());
        for name in [
            "localhost",
            "localhost.",
            "api.localhost",
            "printer.local",
            "metadata.google.internal",
        ] {
            assert!(
                TargetPolicy::PublicOnly.check_domain(name).is_err(),
                "{name}"
            );
            assert!(
                TargetPolicy::AllowPrivate.check_domain(name).is_ok(),
                "{name}"
            );
        }
        for name in [
            "example.com",
            "localhost.example.com",
            "local.example",
            "internal.io",
        ] {
            assert!(
                TargetPolicy::PublicOnly.check_domain(name).is_ok(),
                "{name}"
            );
        }
    }
}
