//! Loosely typed values kept raw by serde and checked during validation, so that one bad
//! value does not hide the others.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// An integer or a string (ports and port ranges, `default_action`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntOrStr {
    /// A TOML integer.
    Int(i64),
    /// A TOML string.
    Str(String),
}

impl fmt::Display for IntOrStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrStr::Int(i) => write!(f, "{i}"),
            IntOrStr::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrStr, E> {
                i64::try_from(v)
                    .map(IntOrStr::Int)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}
