//! The operator's networks, enforced on real connections: the check of a webhook URL when a lead
//! registers it, and the resolver the webhook HTTP client connects through, so the address a
//! delivery actually reaches is checked after name resolution (a name that resolves to
//! loopback, or changes its answer between registration and delivery, is caught). The rule
//! itself is `tenantry_domain::egress`.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tenantry_domain::egress::{Egress, Refused};

/// How long registration waits for a name to resolve before accepting it unchecked (delivery
/// checks it again, every time).
const REGISTRATION_LOOKUP: Duration = Duration::from_secs(3);

/// A webhook's address, refused: the error the guarded resolver returns, found again in a
/// failed request's error chain so the delivery is logged as refused.
#[derive(Debug)]
pub struct RefusedAddress(pub Refused);

impl fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for RefusedAddress {}

/// The host a URL connects to, as the HTTP client parses it (`127.1`, `2130706433` and
/// `0x7f.0.0.1` are all 127.0.0.1 to it, and so to us).
enum Target {
    Address(IpAddr),
    Name(String, u16),
}

fn target(url: &str) -> Result<Target, String> {
    let url = url::Url::parse(url).map_err(|e| format!("the URL does not parse: {e}"))?;
    let port = url.port_or_known_default().unwrap_or(443);
    match url.host() {
        Some(url::Host::Ipv4(ip)) => Ok(Target::Address(IpAddr::V4(ip))),
        Some(url::Host::Ipv6(ip)) => Ok(Target::Address(IpAddr::V6(ip))),
        Some(url::Host::Domain(name)) => Ok(Target::Name(name.to_owned(), port)),
        None => Err("the URL has no host".to_owned()),
    }
}

/// Checks webhook targets against the operator's networks.
#[derive(Debug, Clone, Default)]
pub struct EgressGuard {
    rules: Arc<Egress>,
}

impl EgressGuard {
    pub fn new(rules: Egress) -> EgressGuard {
        EgressGuard { rules: Arc::new(rules) }
    }

    /// At registration: refuses a URL whose host is, or resolves to, an address of the
    /// operator's networks, naming the rule. A name that does not resolve now is accepted
    /// (a receiver may not be up yet); every delivery resolves and checks it again.
    pub async fn check_url(&self, url: &str) -> Result<(), String> {
        let addresses = match target(url)? {
            Target::Address(ip) => vec![ip],
            Target::Name(name, port) => {
                match tokio::time::timeout(REGISTRATION_LOOKUP, tokio::net::lookup_host((name.as_str(), port))).await {
                    Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
                    _ => Vec::new(),
                }
            }
        };
        for ip in addresses {
            self.rules.check(ip).map_err(|refused| format!("the URL's host: {refused}"))?;
        }
        Ok(())
    }

    /// At delivery, before connecting: a URL naming an address is checked here (the client
    /// resolves no name for it); one naming a host is checked by [`GuardedResolver`].
    pub fn check_literal(&self, url: &str) -> Result<(), RefusedAddress> {
        match target(url) {
            Ok(Target::Address(ip)) => self.rules.check(ip).map_err(RefusedAddress),
            _ => Ok(()),
        }
    }

    /// The resolver the webhook client connects through.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver { rules: Arc::clone(&self.rules) })
    }
}

/// Resolves a webhook's host with the system resolver and refuses it when any address it
/// resolves to is the operator's (a name with one public and one private answer could be
/// steered to the private one, so it is refused whole).
pub struct GuardedResolver {
    rules: Arc<Egress>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rules = Arc::clone(&self.rules);
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            for address in &found {
                rules.check(address.ip()).map_err(RefusedAddress)?;
            }
            let addresses: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addresses)
        })
    }
}

/// The refusal inside a failed request, if that is why it failed.
pub fn refusal_in<'e>(error: &'e (dyn StdError + 'static)) -> Option<&'e Refused> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(RefusedAddress(refused)) = e.downcast_ref::<RefusedAddress>() {
            return Some(refused);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenantry_domain::egress::parse_networks;

    #[tokio::test]
    async fn registration_refuses_the_operators_addresses_in_any_notation() {
        let guard = EgressGuard::default();
        for url in [
            "http://127.0.0.1:9000/hook",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://0177.0.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/latest/meta-data",
            "http://169.254.169.254/latest/meta-data",
            "https://10.0.0.5/",
            "https://100.64.1.1/",
            "http://localhost:8080/",
            "http://0.0.0.0/",
        ] {
            let refused = guard.check_url(url).await.expect_err(url);
            assert!(refused.contains("inside the operator's network"), "{url}: {refused}");
        }
        assert!(guard.check_url("https://93.184.215.14/x").await.is_ok(), "a public address");
        let allowing = EgressGuard::new(Egress { allowed: parse_networks("127.0.0.0/8").unwrap() });
        assert!(allowing.check_url("http://127.1:9000/").await.is_ok());
        assert!(allowing.check_url("http://[::1]/").await.is_err(), "only the networks allowed");
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_that_resolves_to_loopback() {
        use reqwest::dns::Resolve;
        let guard = EgressGuard::default();
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let error = match guard.resolver().resolve(name).await {
            Ok(_) => panic!("localhost resolved through the guard"),
            Err(e) => e,
        };
        assert!(refusal_in(error.as_ref()).is_some(), "{error}");
        assert!(guard.check_literal("http://127.1/").is_err());
        assert!(guard.check_literal("http://localhost/").is_ok(), "names are the resolver's to check");
    }
}
