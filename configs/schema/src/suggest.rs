//! "Did you mean ...?" suggestions for unknown keys and values.

/// Keys of the reference system (DAQIRI) and their names here, so that a migrated file gets
/// a precise hint even where the spelling is far apart.
const ALIASES: &[(&str, &str)] = &[
    ("num_bufs", "buf_count"),
    ("affinity", "numa_node` (CPU kinds) or `gpu` (GPU kinds"),
    ("poll_mode", "mode"),
    ("pacing_mbps", "pacing_gbps"),
    ("ipv4_len", "ipv4_total_len"),
    ("queues", "rx_queues` or `tx_queues"),
    ("rx", "rx_queues"),
    ("tx", "tx_queues"),
    ("priority", "rt_priority"),
    ("core", "cpu_core"),
    ("ring_size", "ring_depth"),
    ("mem_regions", "memory_regions"),
    ("regions", "memory_regions"),
    ("flow_id", "id"),
    ("action", "queue`, `rss` or `drop"),
    ("actions", "queue`, `rss` or `drop"),
    ("ids", "rss"),
    ("val", "value"),
    ("msg_type", "ecpri_msg_type"),
    ("mode", "role"),
    ("local_addr", "address"),
    ("ip", "address"),
    ("manager", "engine"),
    ("master_core", "engine.dpdk.main_core"),
    ("max_payload_size", "max_message_size"),
];

/// The candidate closest to `word`, if any is close enough to be a plausible typo.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let w = word.to_ascii_lowercase();
    let mut best: Option<(f64, &'a str)> = None;
    for &c in candidates {
        let cl = c.to_ascii_lowercase();
        let mut score = strsim::jaro_winkler(&w, &cl)
            .max(strsim::normalized_damerau_levenshtein(&w, &cl) + 0.15);
        // "batch" for "batch_size", "reuse_port" for "reuseport".
        if w.len() >= 3 && (cl.contains(&w) || w.contains(&cl)) {
            score = score.max(0.9);
        }
        if w.replace(['_', '-'], "") == cl.replace(['_', '-'], "") {
            score = 1.0;
        }
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.filter(|(s, _)| *s >= 0.8).map(|(_, c)| c)
}

/// A hint for an unknown key: a known alias first, then the closest allowed key.
pub(crate) fn key_hint(word: &str, allowed: &[&str]) -> Option<String> {
    if let Some(c) = closest(word, allowed) {
        return Some(c.to_owned());
    }
    ALIASES
        .iter()
        .find(|(from, to)| *from == word && allowed.iter().any(|a| to.starts_with(a)))
        .or_else(|| ALIASES.iter().find(|(from, _)| *from == word))
        .map(|(_, to)| (*to).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos() {
        let keys = ["batch_size", "ring_depth", "cpu_core", "rt_priority"];
        assert_eq!(closest("batchsize", &keys), Some("batch_size"));
        assert_eq!(closest("bacth_size", &keys), Some("batch_size"));
        assert_eq!(closest("ring_deph", &keys), Some("ring_depth"));
        assert_eq!(closest("batch", &keys), Some("batch_size"));
        assert_eq!(closest("zzz", &keys), None);
        assert_eq!(
            closest("igx-orn", &["host", "igx-orin", "igx-thor", "dgx-spark"]),
            Some("igx-orin")
        );
        assert_eq!(
            closest(
                "sockets",
                &["socket", "afpacket", "afxdp", "dpdk", "ibverbs"]
            ),
            Some("socket")
        );
    }

    #[test]
    fn aliases() {
        assert_eq!(
            key_hint("num_bufs", &["name", "kind", "buf_size", "buf_count"]).as_deref(),
            Some("buf_count")
        );
        assert_eq!(
            key_hint("poll_mode", &["mode", "id"]).as_deref(),
            Some("mode")
        );
        assert_eq!(key_hint("qqqq", &["mode", "id"]), None);
    }
}
