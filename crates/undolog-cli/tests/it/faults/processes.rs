//! The real processes a fault is done to: the gateway binary, the counting upstream, a throwaway
//! PostgreSQL cluster and a small disk. Each is killed or stopped the way a machine fails.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::gateway::{fixtures, free_port, repo};

/// The gateway binary on a fixed address, restartable there (a restart is a new process of the
/// same executor name, as a supervisor would start it).
pub(crate) struct GatewayProcess {
    pub(crate) base: String,
    port: u16,
    config: PathBuf,
    store: String,
    log: PathBuf,
    child: Option<Child>,
}

impl GatewayProcess {
    pub(crate) fn new(dir: &Path, name: &str, toml: &str, store: &str) -> GatewayProcess {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, toml).unwrap();
        let port = free_port();
        GatewayProcess {
            base: format!("http://127.0.0.1:{port}"),
            port,
            config,
            store: store.to_owned(),
            log: dir.join(format!("{name}.log")),
            child: None,
        }
    }

    /// Starts the process (with crash points from `failpoints`, if any); waits until it serves.
    pub(crate) fn start(&mut self, failpoints: Option<&str>) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_undolog"));
        cmd.arg("serve")
            .arg("--config")
            .arg(&self.config)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--store", &self.store])
            .env("RUST_LOG", "warn")
            .env_remove("FAILPOINTS")
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(points) = failpoints {
            cmd.env("FAILPOINTS", points);
        }
        self.child = Some(cmd.spawn().expect("start the gateway"));
        self.wait_serving();
    }

    fn wait_serving(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(Some(status)) = self.child.as_mut().map(|c| c.try_wait().unwrap()) {
                panic!("the gateway exited with {status}: {}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "the gateway did not listen within 30 s: {}",
            self.log_tail()
        );
    }

    /// SIGKILL: no shutdown, no flush, in the middle of whatever it was doing.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process ended by itself (a crash point fired).
    pub(crate) fn exited(&mut self) -> bool {
        match self.child.as_mut().map(|c| c.try_wait().unwrap()) {
            Some(Some(_)) => {
                self.child = None;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        text[text.floor_char_boundary(start)..].to_owned()
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The counting upstream over Streamable HTTP on a fixed port, restartable there.
pub(crate) struct CountingUpstream {
    pub(crate) url: String,
    port: u16,
    ledger: PathBuf,
    child: Option<Child>,
}

impl CountingUpstream {
    pub(crate) fn start(ledger: &Path) -> CountingUpstream {
        let port = free_port();
        let mut upstream = CountingUpstream {
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            ledger: ledger.to_owned(),
            child: None,
        };
        upstream.restart();
        upstream
    }

    pub(crate) fn restart(&mut self) {
        self.kill();
        let mut child = Command::new(python())
            .arg(counting_server())
            .args(["--ledger"])
            .arg(&self.ledger)
            .args(["--http", &self.port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the counting upstream");
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert!(ready.contains("\"ready\""), "counting upstream: {ready:?}");
        self.child = Some(child);
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for CountingUpstream {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) fn python() -> PathBuf {
    fixtures().join("mcp2/bin/python")
}

pub(crate) fn counting_server() -> PathBuf {
    repo().join("crates/undolog-gateway/tests/fixtures/counting_server.py")
}

/// Kills every process whose command line contains `pattern` (the stdio upstreams the gateway
/// spawned), as a crash of that child would.
pub(crate) fn kill_matching(pattern: &str) -> usize {
    let out = Command::new("pkill")
        .args(["-9", "-c", "-f", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// A PostgreSQL cluster of the test's own (initdb in a temporary directory, run as the
/// `postgres` user), to stop with `-m immediate` without touching the machine's server.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
}

impl Cluster {
    pub(crate) fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("undolog-pg-")
            .tempdir()
            .unwrap();
        as_postgres(
            &["chown", "postgres", &dir.path().display().to_string()],
            true,
        );
        let data = dir.path().join("data");
        let status = as_postgres(
            &[
                "initdb",
                "-D",
                &data.display().to_string(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
            false,
        );
        assert!(status, "initdb failed");
        let cluster = Cluster {
            dir,
            port: free_port(),
        };
        cluster.pg_ctl_start();
        cluster
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    pub(crate) fn pg_ctl_start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("pg.log").display().to_string();
        let ok = as_postgres(
            &[
                "pg_ctl",
                "-D",
                &self.data(),
                "-l",
                &log,
                "-o",
                &options,
                "-w",
                "start",
            ],
            false,
        );
        assert!(
            ok,
            "pg_ctl start failed: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `pg_ctl stop -m immediate`: the server dies without a checkpoint, as on a crash.
    pub(crate) fn stop_immediate(&self) {
        as_postgres(
            &[
                "pg_ctl",
                "-D",
                &self.data(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            false,
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_immediate();
    }
}

/// Runs a PostgreSQL program as the `postgres` user (initdb and pg_ctl refuse root).
fn as_postgres(args: &[&str], as_root: bool) -> bool {
    let status = if as_root {
        Command::new(args[0])
            .args(&args[1..])
            .stdout(Stdio::null())
            .status()
    } else {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
    };
    status.map(|s| s.success()).unwrap_or(false)
}
