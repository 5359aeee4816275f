//! The `remote` category (opt-in): `remote_list` and `remote_exec`, shell commands on machines a
//! person connected to the host with `infinity remote connect`.
//!
//! `remote_exec` behaves like a tool server's call: it is dispatched (the host hands the command
//! to the remote, or first asks a person to approve it), the thread yields, and the result
//! arrives when the run ends, as JSON with the run id, the status, the exit code if any and the
//! last [`OUTPUT_CHARS`] characters of stdout and of stderr. A command no allow rule of the agent
//! file covers is shown to a person as a question before it runs ([`RemoteRule`]).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::effect::{Effect, ToolInvocation};
use crate::ids::InputId;
use crate::input::{Input, InputBody};
use crate::library::remotes::RemoteInfo;
pub use crate::library::remotes::{DEFAULT_TIMEOUT_SECONDS, OUTPUT_CHARS, REMOTE_EXEC};
use crate::model::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// The name of the tool that lists the remotes.
pub const REMOTE_LIST: &str = "remote_list";
/// The longest a command may run, in seconds (a day).
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;
/// How long after its timeout a run with no report is given up for lost by the thread itself,
/// in seconds (the host answers it sooner when it is still up).
pub const LOST_AFTER_SECONDS: u64 = 120;

/// A rule of the agent file's `remote_allow:` under which a command runs without asking:
/// `{remote: NAME}` allows everything on that remote; `{command: "git clone:*"}` a command
/// prefix (the words before `:*`, then anything) or, without `:*`, exactly that command, on any
/// remote; both together, that command on that remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRule {
    /// A remote's name (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// `PREFIX:*` or an exact command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl RemoteRule {
    fn covers_remote(&self, remote: &RemoteInfo) -> bool {
        self.remote
            .as_deref()
            .is_none_or(|r| r.eq_ignore_ascii_case(&remote.name) || r == remote.id)
    }

    fn covers_part(&self, part: &str) -> bool {
        let Some(pattern) = self.command.as_deref() else {
            return true;
        };
        match pattern.strip_suffix(":*") {
            Some(prefix) => {
                let prefix = prefix.trim();
                part == prefix
                    || part
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with(char::is_whitespace))
            }
            None => part == pattern.trim(),
        }
    }
}

/// True when `rules` allow `command` on `remote` without asking: a rule for the whole remote, or
/// every part of the command line (split at `;`, `&&`, `||`, `|`, `&` and new lines) matched by
/// a command rule that applies to the remote. A line with command substitution (`$(`, a
/// backquote, `<(`, `>(`) cannot be matched part by part, and asks.
pub fn allowed(rules: &[RemoteRule], remote: &RemoteInfo, command: &str) -> bool {
    let applicable: Vec<&RemoteRule> = rules.iter().filter(|r| r.covers_remote(remote)).collect();
    if applicable.iter().any(|r| r.command.is_none()) {
        return true;
    }
    if ["$(", "`", "<(", ">("].iter().any(|s| command.contains(s)) {
        return false;
    }
    let parts = split_command(command);
    !parts.is_empty()
        && parts
            .iter()
            .all(|part| applicable.iter().any(|r| r.covers_part(part)))
}

/// The simple commands of a line, trimmed, empty ones left out.
fn split_command(command: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' | '\n' => parts.push(std::mem::take(&mut current)),
            // A redirection (`2>&1`, `>&2`, `&>file`) is part of its command.
            '&' if current.ends_with(['>', '<']) || chars.peek() == Some(&'>') => current.push(c),
            '&' | '|' => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                parts.push(std::mem::take(&mut current));
            }
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn no_remotes() -> ToolOutcome {
    ToolOutcome::error(
        "Error: this host takes no remote connections (remotes connect to `infinity serve` or to \
         a stack's API function).",
    )
}

#[derive(Debug)]
pub(super) struct RemoteList;

impl Tool for RemoteList {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            REMOTE_LIST,
            "List the machines people connected for you to run shell commands on: id, name, \
             whether it is online, when it was last seen, and whether it runs commands.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Some(remotes) = ctx.library.and_then(crate::library::Library::remotes) else {
            return no_remotes();
        };
        if remotes.is_empty() {
            return ToolOutcome::ok(
                "No remote is connected. A person connects one with `infinity remote connect \
                 --name NAME --exec`.",
            );
        }
        ToolOutcome::ok(json!({"remotes": remotes}).to_string())
    }
}

/// `remote_exec`, with the agent file's allow rules.
#[derive(Debug)]
pub(super) struct RemoteExec {
    pub(super) rules: Vec<RemoteRule>,
}

impl Tool for RemoteExec {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            REMOTE_EXEC,
            &format!(
                "Run a shell command (`sh -c`) on a connected remote machine (remote_list shows \
                 them). The call waits until the command ends, then returns JSON with the run \
                 id, status (exited, timeout, killed, disconnected, declined), exit code and the \
                 last {OUTPUT_CHARS} characters of stdout and stderr. A command the agent's \
                 rules do not allow is shown to a person first, with your description, and runs \
                 only if they approve."
            ),
            json!({
                "type": "object",
                "properties": {
                    "remote": {"type": "string", "minLength": 1,
                               "description": "The remote's id, or its name (any case)."},
                    "command": {"type": "string", "minLength": 1, "maxLength": 100_000},
                    "description": {"type": "string", "maxLength": 300,
                                    "description": "One line saying what the command does, shown to the person who approves it (never sent to the shell)."},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECONDS,
                                        "description": "Kill it after this many seconds (default 600)."}
                },
                "required": ["remote", "command"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Some(remotes) = ctx.library.and_then(crate::library::Library::remotes) else {
            return no_remotes();
        };
        let wanted = args["remote"].as_str().unwrap_or_default();
        let remote = match find(&remotes, wanted) {
            Ok(remote) => remote,
            Err(why) => return ToolOutcome::error(format!("Error: {why}.")),
        };
        if !remote.exec {
            return ToolOutcome::error(format!(
                "Error: the remote `{}` ({}) was connected without --exec: it is listed but runs \
                 no command.",
                remote.name, remote.id
            ));
        }
        if !remote.online {
            return ToolOutcome::error(format!(
                "Error: the remote `{}` ({}) is offline (last seen {}).",
                remote.name, remote.id, remote.last_seen
            ));
        }
        let command = args["command"].as_str().unwrap_or_default();
        let timeout = args["timeout_seconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        let approved = allowed(&self.rules, remote, command);
        let invocation = ToolInvocation {
            thread_id: ctx.record.id.clone(),
            stack: ctx.record.stack.clone(),
            call_id: ctx.call.id.clone(),
            tool: REMOTE_EXEC.to_owned(),
            args: json!({
                "remote_id": remote.id,
                "remote": remote.name,
                "command": command,
                "description": args["description"].as_str().unwrap_or_default(),
                "timeout_seconds": timeout,
                "approved": approved,
            }),
            server: None,
            notify_key: None,
        };
        ctx.emit(Effect::Dispatch { invocation });
        // The host answers runs whose remote went away; should the host itself go away (a
        // restart forgets its runs), the call still ends. (One waiting for a person has no
        // deadline: people take their time.)
        if approved {
            let after = timeout + LOST_AFTER_SECONDS;
            if let Ok(due) = ctx.now.checked_add(jiff::SignedDuration::from_secs(
                i64::try_from(after).unwrap_or(i64::MAX),
            )) {
                ctx.emit(Effect::SendAt {
                    input: Input {
                        id: InputId::derived(ctx.call.id.as_str(), "deadline"),
                        thread_id: ctx.record.id.clone(),
                        body: InputBody::CallDeadline {
                            call_id: ctx.call.id.clone(),
                            after: format!("{after} s"),
                        },
                    },
                    due,
                });
            }
        }
        ToolOutcome::Dispatched
    }
}

/// The remote `wanted` names: its id, or its name in any case (an error when two have it).
fn find<'a>(remotes: &'a [RemoteInfo], wanted: &str) -> Result<&'a RemoteInfo, String> {
    if let Some(remote) = remotes.iter().find(|r| r.id == wanted) {
        return Ok(remote);
    }
    let named: Vec<&RemoteInfo> = remotes
        .iter()
        .filter(|r| r.name.eq_ignore_ascii_case(wanted))
        .collect();
    match named.as_slice() {
        [one] => Ok(one),
        [] => {
            let known: Vec<String> = remotes
                .iter()
                .map(|r| format!("{} ({})", r.name, r.id))
                .collect();
            Err(format!(
                "no remote is called `{wanted}`; connected: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ))
        }
        many => {
            let ids: Vec<&str> = many.iter().map(|r| r.id.as_str()).collect();
            Err(format!(
                "{} remotes are called `{wanted}` ({}); name one by its id",
                many.len(),
                ids.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str) -> RemoteInfo {
        RemoteInfo {
            id: format!("rm-{name}"),
            name: name.to_owned(),
            online: true,
            exec: true,
            last_seen: jiff::Timestamp::UNIX_EPOCH,
        }
    }

    fn rule(remote: Option<&str>, command: Option<&str>) -> RemoteRule {
        RemoteRule {
            remote: remote.map(str::to_owned),
            command: command.map(str::to_owned),
        }
    }

    #[test]
    fn rules_allow_a_remote_a_prefix_or_an_exact_command() {
        let laptop = remote("Laptop");
        let rules = [rule(None, Some("git clone:*")), rule(None, Some("ls"))];
        assert!(allowed(&rules, &laptop, "git clone https://x"));
        assert!(allowed(&rules, &laptop, "  ls  "));
        assert!(!allowed(&rules, &laptop, "ls -la"), "exact, not a prefix");
        assert!(
            !allowed(&rules, &laptop, "git clonex"),
            "a prefix ends at a word"
        );
        assert!(!allowed(&rules, &laptop, "rm -rf /"));
        // A compound line runs only if every part is allowed.
        assert!(allowed(&rules, &laptop, "git clone a && ls"));
        assert!(allowed(&rules, &laptop, "git clone a 2>&1 >&2 &>/dev/null"));
        assert!(!allowed(&rules, &laptop, "git clone a; rm -rf b"));
        assert!(!allowed(&rules, &laptop, "git clone a | sh"));
        assert!(!allowed(&rules, &laptop, "git clone $(curl x)"));
        // A whole remote, by name in any case; another remote asks.
        let whole = [rule(Some("laptop"), None)];
        assert!(allowed(&whole, &laptop, "rm -rf build && make"));
        assert!(!allowed(&whole, &remote("server"), "ls"));
        // A command on one remote only.
        let scoped = [rule(Some("server"), Some("make:*"))];
        assert!(allowed(&scoped, &remote("server"), "make test"));
        assert!(!allowed(&scoped, &laptop, "make test"));
        assert!(!allowed(&[], &laptop, "ls"));
    }

    #[test]
    fn a_remote_is_found_by_id_or_by_a_name_only_it_has() {
        let mut twin = remote("box");
        twin.id = "rm-box-2".to_owned();
        let remotes = vec![remote("laptop"), remote("box"), twin];
        assert_eq!(find(&remotes, "LAPTOP").unwrap().id, "rm-laptop");
        assert_eq!(find(&remotes, "rm-box-2").unwrap().id, "rm-box-2");
        let err = find(&remotes, "box").unwrap_err();
        assert!(
            err.contains("2 remotes are called `box` (rm-box, rm-box-2)"),
            "{err}"
        );
        let err = find(&remotes, "nas").unwrap_err();
        assert!(err.contains("connected: laptop (rm-laptop)"), "{err}");
    }
}
