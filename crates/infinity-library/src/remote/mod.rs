//! The `remote` category (opt-in): `remote_list` and `remote_exec`, shell commands on machines a
//! person connected to the host with `infinity remote connect`.
//!
//! `remote_exec` behaves like a tool server's call: it is dispatched (the host hands the command
//! to the remote, or first asks a person to approve it), the thread yields, and the result
//! arrives when the run ends, as JSON with the run id, the status, the exit code if any and the
//! last [`OUTPUT_CHARS`] characters of stdout and of stderr. A command no allow rule of the agent
//! file covers is shown to a person as a question before it runs ([`RemoteRule`]).

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use serde_json::{json, Value};

use infinity_agent_core::effect::{Effect, ToolInvocation};
use infinity_agent_core::ids::InputId;
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::internal::{CategoryDef, InternalToolDef};
use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};

use crate::LibraryExt;

/// The name of the tool that lists the remotes.
pub const REMOTE_LIST: &str = "remote_list";
/// The longest a command may run, in seconds (a day).
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;
/// How long after its timeout a run with no report is given up for lost by the thread itself,
/// in seconds (the host answers it sooner when it is still up).
pub const LOST_AFTER_SECONDS: u64 = 120;

mod dispatcher;
mod hub;
mod shell;

pub use dispatcher::RemoteDispatcher;
pub use hub::*;

/// Its flag.
pub const CATEGORY: &str = "remote";

/// The `remote` category. Its settings: `allow:`, the rules under which a command runs
/// without asking (`internal_tools: {remote: {allow: [...]}}`; an agent file's top-level
/// `remote_allow:` is the older spelling).
pub fn category() -> CategoryDef {
    let mut def = CategoryDef::new(
        CATEGORY,
        "Shell commands on machines people connect.",
        vec![
            InternalToolDef {
                name: REMOTE_LIST,
                make: |_| Arc::new(RemoteList),
            },
            InternalToolDef {
                name: REMOTE_EXEC,
                make: |making| {
                    Arc::new(RemoteExec {
                        // Checked when the agent was built (`check_settings`).
                        rules: RemoteSettings::read(making.own).unwrap_or_default().allow,
                    })
                },
            },
        ],
    );
    def.check_settings = |settings| RemoteSettings::read(settings).map(|_| ());
    def
}

/// The `remote` category's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSettings {
    /// Commands `remote_exec` runs without asking a person first.
    #[serde(default)]
    pub allow: Vec<RemoteRule>,
}

impl RemoteSettings {
    /// The settings as an agent gives them (`Null`: none), each rule checked.
    pub fn read(settings: &Value) -> Result<Self, String> {
        if settings.is_null() {
            return Ok(Self::default());
        }
        let read = Self::deserialize(settings).map_err(|e| e.to_string())?;
        for (n, rule) in read.allow.iter().enumerate() {
            rule.check()
                .map_err(|why| format!("allow: rule {}: {why}", n + 1))?;
        }
        Ok(read)
    }
}

/// A rule of the agent file's `remote_allow:` under which a command runs without asking:
/// `{remote: NAME}` allows everything on that remote; `{command: "git clone:*"}` a command
/// prefix (the words before `:*`, then anything) or, without `:*`, exactly that command, on any
/// remote; both together, that command on that remote. `redirects:` lists the redirections the
/// rule's command may have beyond those that touch no file (`2>&1`, `> /dev/null`), each written
/// as in a command: `"> build.log"`, `"2>> /tmp/*"` (any file directly or deeper under `/tmp`),
/// `"<<"` (any here-document), `"<<<"` (any here-string).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRule {
    /// A remote's name (any case) or id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// `PREFIX:*` or an exact command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Redirections `command` may have (`> FILE`, `2>> DIR/*`, `<<`, `<<<`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
}

/// A rule's `command`, read: its words, whether more may follow, and the redirections written
/// in it (`make test > build.log` allows that redirection as `redirects` would).
#[derive(Debug)]
struct CommandPattern {
    words: Vec<String>,
    prefix: bool,
    redirects: Vec<shell::Redirect>,
}

/// One of a rule's `redirects`, read.
#[derive(Debug)]
struct RedirectPattern {
    fd: Option<u32>,
    op: shell::Op,
    /// The file, or a directory when `under` is true (`DIR/*`); empty for `<<` and `<<<`.
    target: String,
    under: bool,
}

impl RemoteRule {
    /// What is wrong with the rule, if anything (a pattern that can never match, `redirects`
    /// without a `command`).
    pub fn check(&self) -> Result<(), String> {
        if self.command.is_none() && !self.redirects.is_empty() {
            return Err(
                "`redirects` needs a `command`: it says what that command may redirect".to_owned(),
            );
        }
        self.pattern()?;
        for redirect in &self.redirects {
            redirect_pattern(redirect)?;
        }
        Ok(())
    }

    fn covers_remote(&self, remote: Option<&RemoteInfo>) -> bool {
        match (&self.remote, remote) {
            (None, _) => true,
            (Some(r), Some(remote)) => r.eq_ignore_ascii_case(&remote.name) || *r == remote.id,
            (Some(_), None) => false,
        }
    }

    fn pattern(&self) -> Result<Option<CommandPattern>, String> {
        let Some(command) = self.command.as_deref() else {
            return Ok(None);
        };
        let (text, prefix) = match command.trim_end().strip_suffix(":*") {
            Some(text) => (text, true),
            None => (command, false),
        };
        let bad = |why: &str| Err(format!("the command pattern `{command}` {why}"));
        if text.chars().any(infinity_agent_core::text::is_hidden) {
            return bad("has a control character");
        }
        let mut simple = match shell::parse(text) {
            Ok(simple) => simple,
            Err(why) => return Err(format!("the command pattern `{command}`: {why}")),
        };
        match simple.as_slice() {
            [] => bad("is empty"),
            [one] if !one.words.is_empty() => {
                let one = simple.swap_remove(0);
                Ok(Some(CommandPattern {
                    words: one.words,
                    prefix,
                    redirects: one.redirects,
                }))
            }
            [_] => bad("has no command, only a redirection"),
            _ => bad("is more than one command: write a rule for each"),
        }
    }

    fn covers_words(&self, words: &[String]) -> bool {
        match self.pattern() {
            Ok(Some(p)) if p.prefix => words.starts_with(&p.words),
            Ok(Some(p)) => words == p.words.as_slice(),
            _ => false,
        }
    }

    fn allows_redirect(&self, redirect: &shell::Redirect) -> bool {
        let written = |r: &shell::Redirect| {
            r.op == redirect.op
                && r.effective_fd() == redirect.effective_fd()
                && r.target == redirect.target
        };
        self.redirects
            .iter()
            .filter_map(|r| redirect_pattern(r).ok())
            .any(|p| p.matches(redirect))
            || self
                .pattern()
                .ok()
                .flatten()
                .is_some_and(|p| p.redirects.iter().any(written))
    }

    /// The rule as an agent file writes it.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(remote) = &self.remote {
            parts.push(format!("remote: {remote}"));
        }
        if let Some(command) = &self.command {
            parts.push(format!("command: {command:?}"));
        }
        if !self.redirects.is_empty() {
            parts.push(format!("redirects: {:?}", self.redirects));
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn redirect_pattern(text: &str) -> Result<RedirectPattern, String> {
    let bad = |why: &str| Err(format!("the redirect pattern `{text}` {why}"));
    let trimmed = text.trim();
    let digits: String = trimmed.chars().take_while(char::is_ascii_digit).collect();
    let fd = if digits.is_empty() {
        None
    } else {
        match digits.parse::<u32>() {
            Ok(fd) => Some(fd),
            Err(_) => return bad("has a file descriptor too large"),
        }
    };
    let rest = &trimmed[digits.len()..];
    let Some((op, len)) = shell::Op::at_start(rest) else {
        return bad("does not start with a redirection (`>`, `>>`, `<`, `2>`, `<<`, ...)");
    };
    let target = rest[len..].trim();
    let here = matches!(
        op,
        shell::Op::HereDoc | shell::Op::HereDocTabs | shell::Op::HereString
    );
    if here && !target.is_empty() {
        return bad("names a here-document or here-string: write `<<` or `<<<` alone");
    }
    if !here && target.is_empty() {
        return bad("names no file");
    }
    let (target, under) = match target.strip_suffix("/*") {
        Some(dir) if !dir.is_empty() => (dir.to_owned(), true),
        _ => (target.to_owned(), false),
    };
    Ok(RedirectPattern {
        fd,
        op,
        target,
        under,
    })
}

impl RedirectPattern {
    fn matches(&self, redirect: &shell::Redirect) -> bool {
        use shell::Op;
        let op_matches = match self.op {
            // `<<` covers both kinds of here-document.
            Op::HereDoc => matches!(redirect.op, Op::HereDoc | Op::HereDocTabs),
            op => op == redirect.op,
        };
        let fd = self.fd.or(self.op.default_fd());
        if !op_matches || fd != redirect.effective_fd() {
            return false;
        }
        match redirect.op {
            Op::HereDoc | Op::HereDocTabs | Op::HereString => true,
            _ if self.under => redirect
                .target
                .strip_prefix(&self.target)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(plain_relative_path),
            _ => redirect.target == self.target,
        }
    }
}

/// True for a path with nothing the shell would expand or that would leave its directory:
/// letters, digits, `-_.+@%,=:` and `/`, no `..` part, not empty.
fn plain_relative_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.+@%,=:/".contains(c))
        && path.split('/').all(|part| !part.is_empty() && part != "..")
}

/// True for a redirection that opens no file a rule could care about: duplicating or closing a
/// file descriptor (`2>&1`, `>&2`, `<&-`), or `/dev/null` (reads nothing, keeps nothing).
fn touches_no_file(redirect: &shell::Redirect) -> bool {
    use shell::Op;
    match redirect.op {
        Op::DupIn | Op::DupOut => {
            redirect.target == "-"
                || (!redirect.target.is_empty()
                    && redirect.target.chars().all(|c| c.is_ascii_digit()))
        }
        Op::HereDoc | Op::HereDocTabs | Op::HereString => false,
        _ => redirect.target == "/dev/null",
    }
}

/// Whether a command runs without asking, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It runs at once: the rules that allow it, as the agent file writes them.
    Allowed(Vec<String>),
    /// A person is asked first: why.
    Asks(String),
}

/// Commands whose arguments the shell runs as code: no prefix rule can say what they run.
const ALWAYS_ASK: &[&str] = &["eval"];

/// Whether `rules` let `command` run on `remote` (`None`: no remote in particular, so only rules
/// for every remote apply) without asking, and why. A rule for the whole remote allows anything
/// but a command with control characters. Otherwise the command is read as `sh` reads it
/// (`shell`): it runs at once only when every simple command in it, those inside substitutions
/// and groups included, is covered by a command rule, and each of its redirections touches no
/// file or is listed in the `redirects` of a rule that covers it. Anything the reader does not
/// understand asks.
pub fn check(rules: &[RemoteRule], remote: Option<&RemoteInfo>, command: &str) -> Verdict {
    if let Some(c) = command
        .chars()
        .find(|c| infinity_agent_core::text::is_hidden(*c))
    {
        return Verdict::Asks(format!(
            "it has the control character {} (U+{:04X}), which could hide what runs",
            infinity_agent_core::text::visible(&c.to_string()),
            u32::from(c)
        ));
    }
    let applicable: Vec<&RemoteRule> = rules.iter().filter(|r| r.covers_remote(remote)).collect();
    if let Some(whole) = applicable
        .iter()
        .find(|r| r.command.is_none() && r.redirects.is_empty())
    {
        return Verdict::Allowed(vec![whole.describe()]);
    }
    if applicable.is_empty() {
        return Verdict::Asks("no rule applies to this remote".to_owned());
    }
    let simple = match shell::parse(command) {
        Ok(simple) => simple,
        Err(why) => return Verdict::Asks(why),
    };
    if simple.is_empty() {
        return Verdict::Asks("it runs no command".to_owned());
    }
    let mut used: Vec<String> = Vec::new();
    for one in &simple {
        let written = one.words.join(" ");
        let outside_rules: Vec<&shell::Redirect> = one
            .redirects
            .iter()
            .filter(|r| !touches_no_file(r))
            .collect();
        if one.words.is_empty() {
            if let Some(redirect) = outside_rules.first() {
                return Verdict::Asks(format!(
                    "the redirection `{redirect}` belongs to no simple command (a group's, or \
                     alone), and rules allow redirections per command"
                ));
            }
            continue;
        }
        if let Some(word) = one
            .words
            .iter()
            .find(|w| !is_assignment(w))
            .filter(|w| ALWAYS_ASK.contains(&w.as_str()))
        {
            return Verdict::Asks(format!(
                "`{word}` runs its arguments as shell code, which rules cannot see into"
            ));
        }
        let covering: Vec<&RemoteRule> = applicable
            .iter()
            .copied()
            .filter(|r| r.covers_words(&one.words))
            .collect();
        if covering.is_empty() {
            let assignment = one.words.first().filter(|w| is_assignment(w));
            return Verdict::Asks(match assignment {
                Some(a) => format!(
                    "no rule allows `{written}` (it starts by setting `{a}`, which a rule must \
                     name too)"
                ),
                None => format!("no rule allows `{written}`"),
            });
        }
        match covering.iter().find(|r| {
            outside_rules
                .iter()
                .all(|redirect| r.allows_redirect(redirect))
        }) {
            Some(rule) => {
                let rule = rule.describe();
                if !used.contains(&rule) {
                    used.push(rule);
                }
            }
            None => {
                let redirect = outside_rules
                    .iter()
                    .find(|redirect| !covering.iter().any(|r| r.allows_redirect(redirect)))
                    .or(outside_rules.first())
                    .map_or_else(String::new, ToString::to_string);
                return Verdict::Asks(format!(
                    "`{written}` has the redirection `{redirect}`, which reads or writes a file \
                     no rule's `redirects` names"
                ));
            }
        }
    }
    Verdict::Allowed(used)
}

/// True for `NAME=value`.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// True when `rules` allow `command` on `remote` without asking ([`check`]).
pub fn allowed(rules: &[RemoteRule], remote: &RemoteInfo, command: &str) -> bool {
    matches!(check(rules, Some(remote), command), Verdict::Allowed(_))
}

fn no_remotes() -> ToolOutcome {
    ToolOutcome::error(
        "Error: this host takes no remote connections (remotes connect to `infinity serve` or to \
         a stack's API function).",
    )
}

#[derive(Debug)]
struct RemoteList;

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
        let Some(remotes) = ctx.library.and_then(|l| l.remotes()) else {
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
struct RemoteExec {
    rules: Vec<RemoteRule>,
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
        let Some(remotes) = ctx.library.and_then(|l| l.remotes()) else {
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
        let description = args["description"].as_str().unwrap_or_default();
        if let Err(why) = one_line(description) {
            return ToolOutcome::error(format!(
                "Error: `description` must be one line of plain text ({why}); nothing was run. \
                 Say what the command does in a sentence; the command itself is shown apart."
            ));
        }
        let timeout = args["timeout_seconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        let verdict = check(&self.rules, Some(remote), command);
        let approved = matches!(verdict, Verdict::Allowed(_));
        let asks = match verdict {
            Verdict::Allowed(_) => String::new(),
            Verdict::Asks(why) => why,
        };
        let invocation = ToolInvocation {
            thread_id: ctx.record.id.clone(),
            lineage: ctx.record.lineage.clone(),
            call_id: ctx.call.id.clone(),
            tool: REMOTE_EXEC.to_owned(),
            args: json!({
                "remote_id": remote.id,
                "remote": remote.name,
                "command": command,
                "description": description,
                "timeout_seconds": timeout,
                "approved": approved,
                "asks": asks,
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
                            result: Some(
                                json!({
                                    "status": "lost",
                                    "reason": format!(
                                        "no report of the command's end within {after} s: the \
                                         remote or the server went away meanwhile; it was told \
                                         to stop"
                                    ),
                                })
                                .to_string(),
                            ),
                        },
                    },
                    due,
                });
            }
        }
        ToolOutcome::Dispatched
    }
}

/// Refuses a description with a line break or a control character in it: a person reads it
/// above the command, and a second line could pass for the command.
fn one_line(description: &str) -> Result<(), String> {
    match description.chars().find(|c| {
        infinity_agent_core::text::is_hidden(*c) || matches!(c, '\n' | '\u{2028}' | '\u{2029}')
    }) {
        Some('\n') => Err("it has a line break".to_owned()),
        Some(c) => Err(format!("it has the character U+{:04X}", u32::from(c))),
        None => Ok(()),
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
mod tests;
