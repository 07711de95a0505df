//! TOML text → [`RawConfig`](crate::schema::RawConfig), turning syntax and shape errors into
//! [`ConfigError`]s with a key path, a line and column, and a suggestion.

use crate::error::ConfigError;
use crate::schema::RawConfig;
use crate::suggest;

/// Pseudo-path of errors in the TOML syntax itself.
pub const TOML_PATH: &str = "<toml>";

/// Parses and deserializes `text`. Serde stops at the first shape error, so this reports one
/// error; semantic problems are all collected later by validation.
pub(crate) fn deserialize(text: &str) -> Result<RawConfig, ConfigError> {
    let de = toml::Deserializer::parse(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| format!(" at {}", line_col(text, s.start)))
            .unwrap_or_default();
        ConfigError::new(
            TOML_PATH,
            format!("TOML syntax error{at}: {}", e.message().trim_end()),
        )
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = inner.span().map(|s| line_col(text, s.start));
        shape_error(&path, inner.message().trim_end(), at)
    })
}

/// "line L, column C" (1-based) of byte offset `at`.
pub(crate) fn line_col(text: &str, at: usize) -> String {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.chars().count(), |nl| {
        before[nl + 1..].chars().count()
    }) + 1;
    format!("line {line}, column {col}")
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() || parent == "." {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The backticked words of a serde message, in order.
fn ticked(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

fn shape_error(path: &str, msg: &str, at: Option<String>) -> ConfigError {
    let at_sfx = at.map(|a| format!(" ({a})")).unwrap_or_default();
    let path = if path == "." { "" } else { path };
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let words = ticked(rest);
        let (key, allowed) = words.split_first().map_or(("", &[][..]), |(k, a)| (*k, a));
        let hint = suggest::key_hint(key, allowed)
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default();
        let list = if allowed.is_empty() {
            "this table takes no keys".to_owned()
        } else {
            format!(
                "allowed keys: {}",
                allowed
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        // serde_path_to_error may or may not already include the key itself.
        let full = if path.rsplit('.').next() == Some(key) {
            path.to_owned()
        } else {
            join(path, key)
        };
        return ConfigError::new(full, format!("unknown key `{key}`{hint} ({list}){at_sfx}"));
    }
    if let Some(rest) = msg.strip_prefix("unknown variant ") {
        let words = ticked(rest);
        let (value, allowed) = words.split_first().map_or(("", &[][..]), |(k, a)| (*k, a));
        let hint = suggest::closest(value, allowed)
            .map(|h| format!("; did you mean \"{h}\"?"))
            .unwrap_or_default();
        let list = allowed
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ");
        return ConfigError::new(
            path,
            format!("unknown value \"{value}\"{hint} (expected one of {list}){at_sfx}"),
        );
    }
    if let Some(rest) = msg.strip_prefix("missing field ") {
        let key = ticked(rest).first().copied().unwrap_or("");
        return ConfigError::new(
            join(path, key),
            format!("required key `{key}` is missing; add it{at_sfx}"),
        );
    }
    ConfigError::new(
        if path.is_empty() { TOML_PATH } else { path },
        format!("{}{at_sfx}", plain_types(msg)),
    )
}

/// Rewrites Rust type names in serde messages into TOML words.
fn plain_types(msg: &str) -> String {
    let mut m = msg
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a table")
        .replace("expected a borrowed string", "expected a string")
        .replace("invalid type: map", "invalid type: table")
        .replace("invalid type: sequence", "invalid type: array");
    if let Some(i) = m.find("expected struct ") {
        m.replace_range(i.., "expected a table");
    }
    if let Some(i) = m.find("expected enum ") {
        m.replace_range(i.., "expected a string");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        assert_eq!(line_col("ab\ncd", 4), "line 2, column 2");
        assert_eq!(line_col("ab", 0), "line 1, column 1");
    }

    #[test]
    fn syntax_error_has_position() {
        let e = deserialize("name = \"x\"\nplatform = \n").unwrap_err();
        assert_eq!(e.path, TOML_PATH);
        assert!(e.message.contains("line 2"), "{}", e.message);
    }
}
