//! The emulators the scripts start stay on this machine: every socket they listen on, the ports
//! the stack's endpoints name and any other port of their processes and the processes they start
//! (LocalStack's DynamoDB Local child), is bound to a loopback address. A socket bound to
//! `0.0.0.0` or `::` answers from the machine's other addresses too.
//!
//! Listening sockets are read from `/proc/net/tcp{,6}` and matched to processes through
//! `/proc/PID/fd`, so the test needs Linux's `/proc`; elsewhere it says it is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use crate::harness;

/// A TCP socket in the `LISTEN` state: where it is bound and the inode that names it in
/// `/proc/PID/fd`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listener {
    addr: SocketAddr,
    inode: u64,
}

/// The `LISTEN` sockets in a `/proc/net/tcp` or `/proc/net/tcp6` table.
fn listeners_in(table: &str) -> Vec<Listener> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields.len() < 10 || fields[3] != "0A" {
                return None;
            }
            let (ip, port) = fields[1].split_once(':')?;
            Some(Listener {
                addr: SocketAddr::new(kernel_ip(ip)?, u16::from_str_radix(port, 16).ok()?),
                inode: fields[9].parse().ok()?,
            })
        })
        .collect()
}

/// An address as the kernel prints it: each 32-bit word of the address's bytes printed as a
/// number in the machine's byte order, 8 hex digits for IPv4, 32 for IPv6.
fn kernel_ip(hex: &str) -> Option<IpAddr> {
    let words = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<Vec<u32>>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))),
        16 => {
            let octets: [u8; 16] = bytes.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        _ => None,
    }
}

/// Loopback only: 127.0.0.0/8, `::1`, or an IPv4 loopback address mapped into IPv6
/// (`::ffff:127.0.0.1`, what a dual-stack socket bound to 127.0.0.1 shows).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Every `LISTEN` socket of this network namespace.
fn all_listeners() -> Vec<Listener> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| listeners_in(&table))
        .collect()
}

/// The socket inodes a process holds open (empty when its `fd` folder cannot be read).
fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?.to_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Every process: its pid and its parent's.
fn processes() -> BTreeMap<u32, u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces and parentheses.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((pid, ppid.parse().ok()?))
        })
        .collect()
}

/// `pids` and all their descendants.
fn with_descendants(pids: &BTreeSet<u32>, parents: &BTreeMap<u32, u32>) -> BTreeSet<u32> {
    let mut tree = pids.clone();
    loop {
        let more: Vec<u32> = parents
            .iter()
            .filter(|(pid, ppid)| tree.contains(ppid) && !tree.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        if more.is_empty() {
            return tree;
        }
        tree.extend(more);
    }
}

fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .unwrap_or_default()
}

/// The port of an endpoint such as `http://127.0.0.1:4566`.
fn endpoint_port(url: &str) -> Option<u16> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

#[test]
fn every_emulator_listens_on_loopback_only() {
    if !Path::new("/proc/net/tcp").exists() {
        eprintln!("skipped: no /proc/net/tcp, so listening sockets cannot be listed here");
        return;
    }
    // A fresh stack: its table made on the emulator, so LocalStack has started DynamoDB Local.
    let Some(env) = harness::fresh_env() else {
        return;
    };
    let ports: BTreeSet<u16> = env
        .iter()
        .filter(|(name, _)| name.starts_with("AWS_ENDPOINT_URL"))
        .filter_map(|(_, url)| endpoint_port(url))
        .collect();
    assert!(!ports.is_empty(), "the stack names no endpoint: {env:?}");

    let listeners = all_listeners();
    for port in &ports {
        assert!(
            listeners.iter().any(|l| l.addr.port() == *port),
            "nothing listens on port {port}, which the stack's endpoints name"
        );
    }

    // The processes serving the endpoints, and what they started.
    let parents = processes();
    let inodes: BTreeMap<u64, SocketAddr> = listeners.iter().map(|l| (l.inode, l.addr)).collect();
    let owners: BTreeSet<u32> = parents
        .keys()
        .copied()
        .filter(|pid| {
            socket_inodes(*pid)
                .iter()
                .any(|i| inodes.get(i).is_some_and(|a| ports.contains(&a.port())))
        })
        .collect();
    let tree = with_descendants(&owners, &parents);
    let mut bad = Vec::new();
    let mut seen = BTreeMap::new();
    for pid in &tree {
        for inode in socket_inodes(*pid) {
            let Some(addr) = inodes.get(&inode) else {
                continue;
            };
            seen.insert(inode, *addr);
            if !is_loopback(addr.ip()) {
                bad.push(format!("{addr} (pid {pid}: {})", command_line(*pid)));
            }
        }
    }
    // An endpoint's port whose process could not be read (another user's) is checked all the same.
    bad.extend(
        listeners
            .iter()
            .filter(|l| ports.contains(&l.addr.port()) && !seen.contains_key(&l.inode))
            .filter(|l| !is_loopback(l.addr.ip()))
            .map(|l| format!("{} (an endpoint's port)", l.addr)),
    );
    bad.sort();
    assert!(
        bad.is_empty(),
        "emulators listen beyond the loopback address, so other machines can reach them:\n  {}",
        bad.join("\n  ")
    );

    // LocalStack in host mode serves DynamoDB from a DynamoDB Local it starts on a port of its
    // own: that port must have been seen, or the check above did not cover it.
    let localstack = tree
        .iter()
        .any(|pid| command_line(*pid).contains("localstack.runtime.main"));
    if localstack {
        assert!(
            seen.values().any(|addr| !ports.contains(&addr.port())),
            "LocalStack runs here, but no listener besides its gateway ({ports:?}) was found \
             after a table was made: has it stopped starting DynamoDB Local as a child? {seen:?}"
        );
    }
}

#[test]
fn kernel_addresses_read_as_the_kernel_writes_them() {
    let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
        0: 0100007F:11D6 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n   \
        1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0\n   \
        2: 0100007F:11D6 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0\n";
    assert_eq!(
        listeners_in(table),
        vec![
            Listener {
                addr: "127.0.0.1:4566".parse().unwrap(),
                inode: 111
            },
            Listener {
                addr: "0.0.0.0:8000".parse().unwrap(),
                inode: 222
            },
        ],
        "established connections (st 01) are not listeners"
    );
    let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
        0: 0000000000000000FFFF00000100007F:11D7 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0 100 0 0 10 0\n   \
        1: 00000000000000000000000001000000:11D7 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 100 0 0 10 0\n   \
        2: 00000000000000000000000000000000:9B9D 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 666 1 0 100 0 0 10 0\n";
    let addrs: Vec<SocketAddr> = listeners_in(v6).into_iter().map(|l| l.addr).collect();
    assert_eq!(
        addrs,
        vec![
            "[::ffff:127.0.0.1]:4567".parse().unwrap(),
            "[::1]:4567".parse().unwrap(),
            "[::]:39837".parse().unwrap(),
        ]
    );
    let loopback: Vec<bool> = addrs.iter().map(|a| is_loopback(a.ip())).collect();
    assert_eq!(loopback, vec![true, true, false]);
    assert!(!is_loopback("0.0.0.0".parse().unwrap()));
    assert!(!is_loopback("192.0.2.2".parse().unwrap()));
    assert!(!is_loopback("::ffff:192.0.2.2".parse().unwrap()));
    assert!(is_loopback("127.0.0.2".parse().unwrap()));
    assert_eq!(endpoint_port("http://127.0.0.1:4566"), Some(4566));
    assert_eq!(endpoint_port("http://localhost:4567/"), Some(4567));
    assert_eq!(endpoint_port("http://example"), None);
}
