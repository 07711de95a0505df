//! Flow rules of one interface, ready for `rtdaq-core`'s flow table.

use crate::model::{Config, InterfaceId};
use rtdaq_core::flow::{DefaultAction, FlowRule, FlowTable};

impl Config {
    /// The flow rules of interface `interface` (an index into [`Config::interfaces`]), in
    /// match order. Queue ids are queue indices (`QueueId(i)` = `rx_queues[i]`).
    ///
    /// # Panics
    /// If `interface` is out of range.
    pub fn flow_rules(&self, interface: usize) -> Vec<FlowRule> {
        assert!(
            interface < self.interfaces.len(),
            "interface index {interface} out of range ({} interfaces)",
            self.interfaces.len()
        );
        self.flows
            .iter()
            .filter(|f| f.interface == InterfaceId(interface))
            .map(|f| f.rule.clone())
            .collect()
    }

    /// What interface `interface` does with RX traffic no rule matched.
    ///
    /// # Panics
    /// If `interface` is out of range.
    pub fn default_action(&self, interface: usize) -> DefaultAction {
        self.interfaces[interface].default_action
    }

    /// The flow table of interface `interface`: its rules in order and its default action.
    ///
    /// # Panics
    /// If `interface` is out of range, or the interface has more than `N` rules (validation
    /// caps them at [`MAX_FLOWS_PER_INTERFACE`](crate::MAX_FLOWS_PER_INTERFACE), so an `N` of
    /// at least that never panics).
    pub fn flow_table<const N: usize>(&self, interface: usize) -> FlowTable<N> {
        let mut table = FlowTable::new(self.default_action(interface));
        let rules = self.flow_rules(interface);
        let n = rules.len();
        for rule in rules {
            if let Err(rule) = table.push(rule) {
                panic!(
                    "flow table of interface {interface} ({}) cannot take flow id {}: {n} rules for a table of {N}",
                    self.interfaces[interface].name, rule.id.0
                );
            }
        }
        table
    }
}
