//! `infinity remote check`: whether an agent file's `remote_allow:` rules let a command run at
//! once or make `remote_exec` ask a person first, and why, read exactly as the tool reads it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::text::visible;
use infinity_library::remote::RemoteInfo;
use infinity_library::remote::{
    check as remote_check, RemoteSettings, Verdict as RemoteVerdict, CATEGORY,
};

/// The exit status when the agent file cannot be read or its rules are wrong (0: allowed,
/// 1: asks).
const BAD_FILE: u8 = 2;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The agent file whose `remote_allow:` rules apply.
    #[arg(long)]
    agent: PathBuf,
    /// The remote the command would run on, by name (any case) or id; without it only rules
    /// for every remote apply.
    #[arg(long)]
    remote: Option<String>,
    /// The command, as the agent would send it: best quoted as one argument after `--`
    /// (several are joined by spaces).
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Prints `allowed (RULE, ...)` or `asks: WHY`; exits 0 when allowed, 1 when it asks.
pub fn check(args: &CheckArgs) -> Result<u8> {
    let file = match AgentFile::load(&args.agent) {
        Ok(file) => file,
        Err(err) => {
            eprintln!("error: {}", visible(&err.to_string()));
            return Ok(BAD_FILE);
        }
    };
    let command = args.command.join(" ");
    // Rules name a remote by its name or its id; the one given stands for both.
    let remote = args.remote.as_ref().map(|name| RemoteInfo {
        id: name.clone(),
        name: name.clone(),
        online: true,
        exec: true,
        last_seen: jiff::Timestamp::UNIX_EPOCH,
    });
    let rules = match RemoteSettings::read(file.internal_tools().settings(CATEGORY)) {
        Ok(settings) => settings.allow,
        Err(why) => {
            eprintln!(
                "error: {}: internal_tools: `{CATEGORY}`: {}",
                args.agent.display(),
                visible(&why)
            );
            return Ok(BAD_FILE);
        }
    };
    match remote_check(&rules, remote.as_ref(), &command) {
        RemoteVerdict::Allowed(rules) => {
            println!("allowed ({})", visible(&rules.join(", ")));
            Ok(0)
        }
        RemoteVerdict::Asks(why) => {
            println!("asks: {}", visible(&why));
            Ok(1)
        }
    }
}
