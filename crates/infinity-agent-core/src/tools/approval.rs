//! Approvals: an agent file may make any of its tools wait for a person's yes before a call
//! runs (`approvals:`). The question is an open choice like a tool server's, answered on every
//! surface the same way; a rule may give it a deadline and what happens then.

use serde::Deserialize;

use crate::ids::{CallId, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::state::{ApprovalDefault, Deadline};

/// The options of an approval question, in order: 0 runs the call.
pub const CHOICES: [&str; 2] = ["Run it", "Do not run it"];

/// The option that runs the call.
pub const RUN: usize = 0;

/// The option that does not (and the one a dismissal sends).
pub const DO_NOT_RUN: usize = 1;

/// A rule of an agent file's `approvals:`.
///
/// ```yaml
/// approvals:
///   - tools: [send_email, "remote_*"]   # names, or patterns where * is any run of characters
///     deadline: 24h                      # optional: the question is answered by itself then
///     default: decline                   # what it answers: decline (the default) or approve
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// The tools it covers: names, or patterns where `*` is any run of characters (`"*"`: every
    /// tool).
    pub tools: Vec<String>,
    /// How long the question stays open; unanswered then, it gets `default`.
    #[serde(default)]
    pub deadline: Option<Deadline>,
    /// What the deadline answers.
    #[serde(default)]
    pub default: ApprovalDefault,
}

impl ApprovalRule {
    /// The first of its patterns that `tool` matches.
    pub fn pattern_for(&self, tool: &str) -> Option<&str> {
        self.tools
            .iter()
            .map(String::as_str)
            .find(|pattern| matches(pattern, tool))
    }

    /// What is wrong with the rule, if anything.
    pub fn problem(&self) -> Option<String> {
        if self.tools.is_empty() {
            return Some("a rule lists no tools (`tools: [NAME or PATTERN, ...]`)".to_owned());
        }
        if let Some(empty) = self.tools.iter().find(|t| t.trim().is_empty()) {
            return Some(format!("`{empty}` is not a tool's name or pattern"));
        }
        if self.deadline.is_none() && self.default == ApprovalDefault::Approve {
            return Some(format!(
                "the rule for {} says `default: approve` without a `deadline`: the default is \
                 what the deadline answers; give one (e.g. `deadline: 24h`)",
                self.tools.join(", ")
            ));
        }
        None
    }
}

/// The rule of `rules` that covers `tool` (the first that does), and the pattern that matched.
pub fn rule_for<'a>(rules: &'a [ApprovalRule], tool: &str) -> Option<(&'a ApprovalRule, &'a str)> {
    rules
        .iter()
        .find_map(|rule| rule.pattern_for(tool).map(|pattern| (rule, pattern)))
}

/// True when `name` matches `pattern`, where `*` stands for any run of characters (none
/// included) and everything else for itself.
pub fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// How much of the arguments a question shows.
const ARGS_SHOWN: usize = 4_000;

/// The question a person is asked before a call of `tool` with `args` runs: the tool and its
/// arguments (as indented JSON, hidden characters shown), why it is asked, and what happens if
/// nobody answers by `due`.
pub fn question(
    tool: &str,
    args: &serde_json::Value,
    pattern: &str,
    due: Option<(jiff::Timestamp, &ApprovalRule)>,
) -> String {
    use crate::text::visible;
    let mut prompt = format!("Run the tool `{}` with these arguments?\n", visible(tool));
    let pretty = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    let shown = pretty
        .char_indices()
        .nth(ARGS_SHOWN)
        .map_or(pretty.as_str(), |(at, _)| &pretty[..at]);
    for line in visible(shown).split('\n') {
        prompt.push_str("    ");
        prompt.push_str(line);
        prompt.push('\n');
    }
    if shown.len() < pretty.len() {
        prompt.push_str(&format!(
            "    … ({} more characters; the thread's history has them all)\n",
            pretty[shown.len()..].chars().count()
        ));
    }
    prompt.push_str(&format!(
        "Asked because the agent file requires approval for `{}`.",
        visible(pattern)
    ));
    if let Some((due, rule)) = due {
        let outcome = match rule.default {
            ApprovalDefault::Decline => "it is declined",
            ApprovalDefault::Approve => "it runs",
        };
        prompt.push_str(&format!(
            "\nIf nobody answers by {} ({} after the call), {outcome}.",
            due.strftime("%Y-%m-%d %H:%M:%S UTC"),
            rule.deadline.as_ref().map_or("", Deadline::as_str)
        ));
    }
    prompt
}

/// The timer input that answers the approval of `call_id` with its rule's default once `after`
/// (the rule's deadline, as the agent file gives it) has passed. Its id is the approval's own,
/// apart from the deadline the tool may have once the call runs.
pub fn deadline_input(thread_id: &ThreadId, call_id: &CallId, after: String) -> Input {
    Input {
        id: InputId::derived(call_id.as_str(), "approval-deadline"),
        thread_id: thread_id.clone(),
        body: InputBody::ApprovalDeadline {
            call_id: call_id.clone(),
            after,
        },
    }
}

/// The result of a call the person asked did not approve (`after`: by the deadline, as the agent
/// file gives it).
pub fn declined_text(by: Settled<'_>) -> String {
    match by {
        Settled::Person => "Not run: the person asked did not approve this call. Do not try it \
                            again unless the user asks you to."
            .to_owned(),
        Settled::Deadline(after) => format!(
            "Not run: nobody approved this call within {after}, and the agent file declines it \
             then. Do not try it again unless the user asks you to."
        ),
        Settled::Unattended => "Not run: this call needs a person's approval, and nobody can give \
                                one here (this run has no person to ask). Do not try it again \
                                unless the user asks you to."
            .to_owned(),
    }
}

/// Who settled an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled<'a> {
    /// A person, by their answer.
    Person,
    /// Its rule's deadline (as the agent file gives it), by its default.
    Deadline(&'a str),
    /// Nobody could be asked (`infinity run`): its default was taken.
    Unattended,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_names_with_stars_standing_for_any_run_of_characters() {
        for (pattern, name, expected) in [
            ("send_email", "send_email", true),
            ("send_email", "send_emails", false),
            ("send_*", "send_email", true),
            ("send_*", "send_", true),
            ("send_*", "resend_email", false),
            ("*_email", "send_email", true),
            ("*", "anything", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "a_b_x_c", true),
            ("a*b*c", "a_c_b", false),
            ("ab*ba", "aba", false),
            ("remote_*", "remote_exec", true),
        ] {
            assert_eq!(matches(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn a_question_shows_the_arguments_and_what_the_deadline_answers() {
        let rule: ApprovalRule =
            serde_yaml_ng::from_str("{tools: [\"send_*\"], deadline: 24h}").unwrap();
        let due = jiff::Timestamp::from_second(86_400).unwrap();
        let prompt = question(
            "send_email",
            &serde_json::json!({"to": "a@b.c", "body": "hi\u{1b}[2K"}),
            "send_*",
            Some((due, &rule)),
        );
        assert_eq!(
            prompt,
            "Run the tool `send_email` with these arguments?\n    {\n      \"body\": \"hi\\u001b[2K\",\n      \"to\": \"a@b.c\"\n    }\nAsked because the agent file requires approval for `send_*`.\nIf nobody answers by 1970-01-02 00:00:00 UTC (24h after the call), it is declined."
        );
    }

    #[test]
    fn a_rule_without_tools_or_approving_without_a_deadline_is_named() {
        let rule = |yaml: &str| serde_yaml_ng::from_str::<ApprovalRule>(yaml).unwrap();
        assert!(rule("{tools: []}").problem().unwrap().contains("no tools"));
        let approve = rule("{tools: [x], default: approve}").problem().unwrap();
        assert!(approve.contains("deadline"), "{approve}");
        assert_eq!(
            rule("{tools: [x], default: approve, deadline: 1h}").problem(),
            None
        );
    }
}
