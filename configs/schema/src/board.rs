//! Board warnings: what is valid but poor on the config's board (facts from
//! `rtdaq_platform::board`). Errors about boards are validation rules (`validate/board.rs`,
//! `validate/cores.rs`); these only warn, because the board's core split is a default the
//! operator may have changed (`isolcpus=` on the kernel command line is the truth, and
//! `rtdaq doctor` checks it).

use crate::error::ConfigError;
use crate::model::{Config, Engine, RxMode};

impl Config {
    /// Warnings about this config on its board, each with the key path it is about:
    /// - a queue thread (I/O or consumer) on a core that is not one of the board's isolated
    ///   cores: it shares its core with the OS, IRQs and RCU callbacks;
    /// - the DPDK main (housekeeping) thread on an isolated core.
    ///
    /// Empty for `host`, which knows no board. `rtdaq config check` and the build print them.
    pub fn warnings(&self) -> Vec<ConfigError> {
        let Some(board) = self.platform.board() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut queue_core = |path: String, what: &str, core: u32| {
            if board.has_core(core) && !board.is_isolated(core) {
                out.push(ConfigError::new(
                    path,
                    format!(
                        "core {core} is not one of {}'s isolated cores ({}): {what} would share \
                         it with the OS, IRQs and RCU callbacks (cores {}); move it to an \
                         isolated core",
                        board.name,
                        board.isolated_cpulist(),
                        board.housekeeping_cpulist()
                    ),
                ));
            }
        };
        for (i, iface) in self.interfaces.iter().enumerate() {
            for (n, q) in iface.rx_queues.iter().enumerate() {
                let p = format!("interfaces[{i}].rx_queues[{n}]");
                queue_core(format!("{p}.cpu_core"), "the I/O thread", q.cpu_core);
                if let RxMode::Indirect { consumer_core } = q.mode {
                    queue_core(
                        format!("{p}.consumer_core"),
                        "the consumer thread",
                        consumer_core,
                    );
                }
            }
            for (n, q) in iface.tx_queues.iter().enumerate() {
                queue_core(
                    format!("interfaces[{i}].tx_queues[{n}].cpu_core"),
                    "the I/O thread",
                    q.cpu_core,
                );
            }
        }
        if let Engine::Dpdk(e) = &self.engine {
            if let Some(c) = e.main_core.filter(|&c| board.is_isolated(c)) {
                out.push(ConfigError::new(
                    "engine.dpdk.main_core",
                    format!(
                        "core {c} is an isolated core of {}; the DPDK main thread is \
                         housekeeping: put it on {}",
                        board.name,
                        board.housekeeping_cpulist()
                    ),
                ));
            }
        }
        out
    }
}
