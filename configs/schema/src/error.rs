//! Error types: one [`ConfigError`] per problem, all of them collected in [`ConfigErrors`].

use std::fmt;

/// One problem in a deployment config: the key path it is about and what to do.
///
/// Displays as `path: message`, e.g.
/// `interfaces[0].rx_queues[1].memory_regions[0]: no memory region named "gpu_rx" (known: "cpu_rx", "hdr")`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// Key path in the TOML document (`interfaces[0].rx_queues[1].batch_size`), or a
    /// pseudo-path in angle brackets for problems that have none (`<file>`, `<toml>`).
    pub path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ConfigError {
    /// Builds an error from a path and a message.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Every problem found in a deployment config (never empty when returned as an error).
///
/// Displays one error per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", Lines(.0))]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// Number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no errors.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over the errors.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// True when one error has exactly this path and a message containing `needle`.
    pub fn contains(&self, path: &str, needle: &str) -> bool {
        self.0
            .iter()
            .any(|e| e.path == path && e.message.contains(needle))
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

struct Lines<'a>(&'a [ConfigError]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Collects errors during validation.
#[derive(Debug, Default)]
pub(crate) struct Errors(Vec<ConfigError>);

impl Errors {
    /// Records one error.
    pub(crate) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError::new(path, message));
    }

    /// True when nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The collected errors, in the order found.
    pub(crate) fn into_inner(self) -> Vec<ConfigError> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_one_per_line() {
        let e = ConfigErrors(vec![
            ConfigError::new("a.b", "bad"),
            ConfigError::new("c[0]", "worse"),
        ]);
        assert_eq!(e.to_string(), "a.b: bad\nc[0]: worse");
        assert!(e.contains("c[0]", "wor"));
        assert!(!e.contains("c", "wor"));
    }
}
