//! `[[flows]]`.

use super::IntOrStr;
use serde::Deserialize;

/// `[[flows]]`: interface, id, match, and exactly one action (checked in validation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub interface: String,
    pub id: i64,
    #[serde(rename = "match", default)]
    pub matcher: RawMatch,
    #[serde(default)]
    pub queue: Option<i64>,
    #[serde(default)]
    pub rss: Option<Vec<i64>>,
    #[serde(default)]
    pub drop: Option<bool>,
}

/// `[flows.match]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatch {
    #[serde(default)]
    pub ethertype: Option<i64>,
    #[serde(default)]
    pub vlan_id: Option<i64>,
    #[serde(default)]
    pub ipv4_src: Option<String>,
    #[serde(default)]
    pub ipv4_dst: Option<String>,
    #[serde(default)]
    pub ipv4_total_len: Option<i64>,
    #[serde(default)]
    pub udp_src: Option<IntOrStr>,
    #[serde(default)]
    pub udp_dst: Option<IntOrStr>,
    #[serde(default)]
    pub ecpri_msg_type: Option<i64>,
    #[serde(default)]
    pub word: Option<RawWord>,
}

/// Where a `word` offset counts from, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawWordBase {
    Frame,
    UdpPayload,
}

/// `flows.match.word`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWord {
    pub base: RawWordBase,
    pub offset: i64,
    pub value: i64,
    #[serde(default = "full_mask")]
    pub mask: i64,
}

fn full_mask() -> i64 {
    0xFFFF_FFFF
}
