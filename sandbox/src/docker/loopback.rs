//! The host's way to a port on a [`crate::NetworkPolicy::Loopback`] sandbox: the container runs
//! on Docker's `none` network (its own network namespace holding only `lo`), and a
//! [`Forwarder`] listens on `127.0.0.1:<ephemeral>` on the host; each connection it accepts is
//! relayed to `127.0.0.1:<port>` *inside* the container's namespace.
//!
//! The namespace is opened once, when the forwarder starts: the container's main process
//! (`State.Pid`) is opened as `/proc/<pid>`, checked to be in the container's cgroup (its id in
//! `/proc/<pid>/cgroup`), and its `ns/net` opened through that same directory handle, so a pid
//! reused meanwhile cannot hand over another process's namespace. For each connection a
//! dedicated OS thread enters the namespace (`setns`), connects a TCP socket to its loopback
//! (bounded by [`CONNECT_TIMEOUT`]) and ends; the socket keeps its namespace, and tokio copies
//! the bytes both ways. At most [`MAX_CONNECTIONS`] are relayed at once (the next waits to be
//! accepted). Nothing is reachable *from* the sandbox: every connection is made by the host to
//! the sandbox's own loopback, the same trust as a TCP connection to its address on a network.
//!
//! The forwarder ends (its listener closed, its connections dropped) when dropped: the
//! sandbox drops it on [`crate::Sandbox::remove`] and with itself.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use nix::sched::{CloneFlags, setns};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Connections relayed at once per forwarder.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// How long a connect inside the sandbox may take (a loopback connect answers at once unless
/// the listener's backlog is full).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A running forwarder; dropping it stops it.
#[derive(Debug)]
pub(crate) struct Forwarder {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// The host address that reaches the sandbox's port.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether it still relays (its task has not ended).
    pub(crate) fn is_running(&self) -> bool {
        !self.task.is_finished()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        // Aborting the accept loop drops its listener and its connections' tasks with it.
        self.task.abort();
    }
}

/// Opens the network namespace of `pid`, the main process of container `container_id`; refuses
/// a process that is not in that container's cgroup.
pub(crate) fn open_netns(pid: i64, container_id: &str) -> Result<File, String> {
    if pid <= 0 {
        return Err(format!(
            "the container's process id is {pid} (is it running?)"
        ));
    }
    let dir =
        File::open(format!("/proc/{pid}")).map_err(|e| format!("cannot open /proc/{pid}: {e}"))?;
    // Through the directory handle: the same process, or nothing once it is gone.
    let via = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let cgroup = std::fs::read_to_string(format!("{via}/cgroup"))
        .map_err(|e| format!("cannot read /proc/{pid}/cgroup: {e}"))?;
    if container_id.is_empty() || !cgroup.contains(container_id) {
        return Err(format!(
            "process {pid} is not in the container's cgroup (is the engine in another pid namespace?)"
        ));
    }
    File::open(format!("{via}/ns/net")).map_err(|e| format!("cannot open /proc/{pid}/ns/net: {e}"))
}

/// Starts a forwarder from `127.0.0.1:<ephemeral>` to `127.0.0.1:port` in the namespace `ns`.
pub(crate) async fn start(ns: File, port: u16) -> io::Result<Forwarder> {
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(serve(listener, Arc::new(ns), port));
    Ok(Forwarder { addr, task })
}

async fn serve(listener: TcpListener, ns: Arc<File>, port: u16) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let inbound = match listener.accept().await {
            Ok((inbound, _)) => inbound,
            Err(e) => {
                // Out of file descriptors and the like: pause rather than spin.
                tracing::warn!(error = %e, "loopback forwarder: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ns = ns.clone();
        connections.spawn(async move {
            let _slot = slot;
            relay(inbound, ns, port).await;
        });
    }
}

async fn relay(mut inbound: TcpStream, ns: Arc<File>, port: u16) {
    let mut outbound = match connect_inside(ns, port).await {
        Ok(s) => s,
        Err(e) => {
            // Nothing listens yet (an adapter starting): the host side is closed, its client
            // retries.
            tracing::debug!(port, error = %e, "loopback forwarder: connect inside the sandbox failed");
            return;
        }
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
}

/// A TCP connection to `127.0.0.1:port` in the namespace `ns`, made by a thread of its own that
/// enters the namespace and ends.
async fn connect_inside(ns: Arc<File>, port: u16) -> io::Result<TcpStream> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("rb-loopback".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let connected = setns(&*ns, CloneFlags::CLONE_NEWNET)
                .map_err(io::Error::from)
                .and_then(|()| {
                    let to = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
                    std::net::TcpStream::connect_timeout(&to, CONNECT_TIMEOUT)
                });
            // The thread ends here: nothing else ever runs in the sandbox's namespace.
            let _ = tx.send(connected);
        })?;
    let stream = rx
        .await
        .map_err(|_| io::Error::other("the connecting thread ended without an answer"))??;
    stream.set_nonblocking(true)?;
    TcpStream::from_std(stream)
}

/// Whether this process may enter other network namespaces (`setns` needs `CAP_SYS_ADMIN`):
/// tried on a thread of its own, into the namespace it is already in.
pub(crate) fn can_enter_namespaces() -> bool {
    std::thread::spawn(|| {
        File::open("/proc/thread-self/ns/net")
            .map_err(|_| ())
            .and_then(|own| setns(&own, CloneFlags::CLONE_NEWNET).map_err(|_| ()))
            .is_ok()
    })
    .join()
    .unwrap_or(false)
}

/// Whether the process at the other end of the engine's unix socket `path` (the daemon) shares
/// this process's pid namespace, so the pids the engine reports are ours.
pub(crate) async fn engine_shares_pid_namespace(path: &std::path::Path) -> bool {
    let Ok(stream) = tokio::net::UnixStream::connect(path).await else {
        return false;
    };
    let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid()) else {
        return false;
    };
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    pid > 0 && ns(&pid.to_string()).is_some_and(|theirs| Some(theirs) == ns("self"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_opened_only_for_the_containers_own_process() {
        let e = open_netns(0, "abc").expect_err("no process");
        assert!(e.contains("process id is 0"), "{e}");
        // This test's own process is in no container of that id.
        let me = i64::from(std::process::id());
        let e = open_netns(me, "0123456789abcdef0123456789abcdef").expect_err("not its cgroup");
        assert!(e.contains("not in the container's cgroup"), "{e}");
        let e = open_netns(me, "").expect_err("no id");
        assert!(e.contains("not in the container's cgroup"), "{e}");
    }
}
