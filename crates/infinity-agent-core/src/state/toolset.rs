//! The tools a conversation got from tool servers, as its root thread's record keeps them.
//!
//! The API's document is written from these types and their doc comments, and its words are
//! held fixed: there a conversation is still a *session* and [`DiscoveredTool`] is
//! `SessionTool`. Both change only with the document.

use serde::{Deserialize, Serialize};

use crate::model::ToolSpec;

/// A tool a session got from a tool server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SessionTool")]
pub struct DiscoveredTool {
    /// The server's base URL, as configured.
    pub server: String,
    /// Where its invocations go (the manifest's `endpoint`).
    pub endpoint: String,
    /// The tool as the model sees it.
    #[serde(flatten)]
    pub spec: ToolSpec,
    /// How long a call may wait for its result (the server's `deadline` in the agent file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

/// How long a dispatched call may go without a result before it gets an error result: a whole
/// number and a unit, `s`, `m`, `h` or `d` (`90s`, `30m`, `2h`, `7d`). Kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct Deadline {
    text: String,
    seconds: u64,
}

/// The longest deadline: a year.
const MAX_DEADLINE_SECONDS: u64 = 366 * 86_400;

impl Deadline {
    /// The deadline in seconds.
    pub fn seconds(&self) -> u64 {
        self.seconds
    }

    /// The deadline as written (`2h`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// When it passes for what started at `start` (`None` past the end of time).
    pub fn due_from(&self, start: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let seconds = i64::try_from(self.seconds).ok()?;
        start
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .ok()
    }
}

impl TryFrom<String> for Deadline {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let trimmed = text.trim();
        let unit_at = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(unit_at);
        let scale = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            _ => 0,
        };
        let seconds = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .filter(|s| (1..=MAX_DEADLINE_SECONDS).contains(s));
        match seconds {
            Some(seconds) => Ok(Deadline {
                text: trimmed.to_owned(),
                seconds,
            }),
            None => Err(format!(
                "deadline `{text}` must be a whole number and a unit (s, m, h or d), from 1s to \
                 366d, e.g. `30m` or `2h`"
            )),
        }
    }
}

impl From<Deadline> for String {
    fn from(deadline: Deadline) -> String {
        deadline.text
    }
}

/// The tools of one session, kept on its root thread's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Toolset {
    /// The tools loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<DiscoveredTool>,
    /// What was not loaded, and why (shown to the user when the session starts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl Toolset {
    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&DiscoveredTool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_a_number_and_a_unit() {
        for (text, seconds) in [("90s", 90), ("30m", 1_800), ("2h", 7_200), (" 7d", 604_800)] {
            assert_eq!(
                Deadline::try_from(text.to_owned()).unwrap().seconds(),
                seconds
            );
        }
        for bad in ["", "2", "h", "0s", "1.5h", "2 h", "2w", "367d", "-1m"] {
            let error = Deadline::try_from(bad.to_owned()).unwrap_err();
            assert!(error.contains(&format!("`{bad}`")), "{error}");
        }
    }
}
