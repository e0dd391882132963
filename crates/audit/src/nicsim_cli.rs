//! A nicsim server driven through its command line, as a user drives it: the audit links no
//! crate it audits, nicsim's included, so it starts `nicsim serve` of the build and asks it
//! with `nicsim stats --json` and `nicsim traffic`.

use crate::children::{Running, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long the server may take to open its control socket.
const SERVE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Nicsim {
    program: PathBuf,
    root: PathBuf,
    server: Option<Running>,
}

impl Nicsim {
    /// Starts `program serve` with two ports under `scratch`, its engine on `cpu`.
    pub fn start(program: &Path, scratch: &Scratch, cpu: usize) -> Result<Nicsim, String> {
        if !program.is_file() {
            return Err(format!("{}: no such program: build it with `make build` or pass --nicsim", program.display()));
        }
        let root = scratch.path().join("nicsim");
        let args: Vec<String> =
            ["--root", &root.display().to_string(), "serve", "--ports", "2", "--cpu", &cpu.to_string()]
                .map(str::to_string)
                .to_vec();
        let server = Running::spawn(program, &args, None, &[], scratch.path().join("nicsim.log"))?;
        let mut sim = Nicsim { program: program.to_path_buf(), root, server: Some(server) };
        let deadline = Instant::now() + SERVE_TIMEOUT;
        while !sim.root.join("nicsim.sock").exists() {
            sim.server_mut().alive().map_err(|e| format!("nicsim serve: {e}"))?;
            if Instant::now() > deadline {
                return Err(format!("nicsim serve opened no control socket within {} s", SERVE_TIMEOUT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(sim)
    }

    fn server_mut(&mut self) -> &mut Running {
        self.server.as_mut().expect("a Nicsim holds its server until dropped")
    }

    /// What drivers pass as `--sysfs`.
    pub fn devices(&self) -> PathBuf {
        self.root.join("devices")
    }

    /// The PCI addresses of its ports, in port order.
    pub fn port_addresses(&self) -> Result<Vec<String>, String> {
        let dir = self.devices();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// One `nicsim` command against this server; its standard output.
    fn cli(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.program)
            .arg("--root")
            .arg(&self.root)
            .args(args)
            .output()
            .map_err(|e| format!("running nicsim {}: {e}", args.join(" ")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!("nicsim {}: {}", args.join(" "), err.trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Each port's counters, as `nicsim stats --json` gives them.
    pub fn ports(&self) -> Result<Vec<Value>, String> {
        let text = self.cli(&["stats", "--json"])?;
        let stats: Value = serde_json::from_str(&text).map_err(|e| format!("nicsim stats --json: {e}"))?;
        stats["ports"].as_array().cloned().ok_or_else(|| "nicsim stats --json has no ports".to_string())
    }

    /// The frames each port's sink has counted.
    pub fn sink_packets(&self) -> Result<Vec<u64>, String> {
        self.ports()?
            .iter()
            .map(|p| p["sink_packets"].as_u64().ok_or_else(|| "nicsim stats --json: no sink_packets".to_string()))
            .collect()
    }

    pub fn start_traffic(&self, port: usize) -> Result<(), String> {
        self.cli(&["traffic", "start", "--port", &port.to_string()]).map(drop)
    }

    pub fn stop_traffic(&self, port: usize) -> Result<(), String> {
        self.cli(&["traffic", "stop", "--port", &port.to_string()]).map(drop)
    }

    /// Waits until every port has a receive and a transmit queue enabled, or `driver_alive`
    /// fails, or `timeout` passes.
    pub fn wait_ports_up(
        &self,
        timeout: Duration,
        mut driver_alive: impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let enabled = |p: &Value, key: &str| p[key].as_u64().unwrap_or(0) > 0;
        loop {
            if self.ports()?.iter().all(|p| enabled(p, "rx_queues_enabled") && enabled(p, "tx_queues_enabled")) {
                return Ok(());
            }
            driver_alive()?;
            if Instant::now() > deadline {
                return Err(format!("the driver did not bring the ports up within {} s", timeout.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Nicsim {
    /// SIGTERM, so that the server removes its devices; killed if it does not end.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = server.terminate(Duration::from_secs(10));
        }
    }
}
