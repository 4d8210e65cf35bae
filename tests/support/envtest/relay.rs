//! A TCP relay between a client under test and the apiserver (issue 25): it counts the
//! connections the client opens, and it can cut the client off (a network partition: every
//! open connection dropped, new ones closed at once) while the apiserver and everything
//! else carry on. TLS passes through untouched (the apiserver's certificate names
//! 127.0.0.1, where the relay listens).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running relay; it stops when dropped.
pub struct Relay {
    /// `https://127.0.0.1:PORT`, to put in the client's kubeconfig.
    pub url: String,
    counts: Arc<Counts>,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    unreachable: AtomicU64,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.cut.send_replace(true);
    }
}

impl Relay {
    /// Relays 127.0.0.1:(a free port) to 127.0.0.1:`target`.
    pub async fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay binds");
        let url = format!("https://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let counts = Arc::new(Counts::default());
        let (cut, cut_rx) = watch::channel(false);
        let task = tokio::spawn(accept(listener, target, counts.clone(), cut_rx));
        Relay { url, counts, cut, task }
    }

    /// Connections the client opened so far (each one a request or a watch, or an attempt
    /// at one while the apiserver or the relay is down).
    pub fn connections(&self) -> u64 {
        self.counts.accepted.load(Ordering::Relaxed)
    }

    /// Of those, how many found the apiserver unreachable.
    pub fn unreachable(&self) -> u64 {
        self.counts.unreachable.load(Ordering::Relaxed)
    }

    /// Cuts the client off (`true`: open connections dropped, new ones closed) or lets it
    /// through again (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

async fn accept(listener: TcpListener, target: u16, counts: Arc<Counts>, cut: watch::Receiver<bool>) {
    loop {
        let Ok((client, _)) = listener.accept().await else { continue };
        counts.accepted.fetch_add(1, Ordering::Relaxed);
        if *cut.borrow() {
            continue;
        }
        let (counts, mut cut) = (counts.clone(), cut.clone());
        tokio::spawn(async move {
            let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)).await else {
                counts.unreachable.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let (mut client, mut upstream) = (client, upstream);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                _ = cut.wait_for(|c| *c) => {}
            }
        });
    }
}
