//! The `infinity` binary, run as a user runs it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use infinity_test_support::repo;

fn infinity(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(args)
        .current_dir(repo())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_demo_runs_offline_and_prints_json_lines() {
    let out = infinity(&[
        "run",
        "--agent",
        "examples/demo/agent.yaml",
        "--json",
        "--timeout",
        "60",
        "Plan the launch party",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("scripted model"), "{stderr}");
    let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| events.iter().filter(|e| e["type"] == t).collect::<Vec<_>>();
    assert!(events.iter().all(|e| e["thread_id"].is_string()));
    assert_eq!(of("user_message").len(), 1);
    assert_eq!(of("thread_spawned").len(), 2);
    assert_eq!(of("thread_closed").len(), 2);
    assert!(of("thread_spawned")
        .iter()
        .all(|e| e["child_id"].is_string()));
    let calls = of("tool_call");
    assert!(calls
        .iter()
        .all(|c| c["call_id"].is_string() && c["name"].is_string() && c["args"].is_object()));
    for name in [
        "sleep",
        "spawn_thread",
        "report_to_parent",
        "close_thread",
        "receive_event__injected",
    ] {
        assert!(calls.iter().any(|c| c["name"] == name), "no call of {name}");
    }
    let results = of("tool_result");
    assert!(results
        .iter()
        .all(|r| r["is_error"] == false && r["text"].is_string()));
    assert!(results
        .iter()
        .any(|r| r["text"].as_str().unwrap().starts_with("Sleep interrupted")));
    let texts: Vec<&str> = of("assistant_text")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        texts.contains(
            &"Everything is ready: Invitations drafted for 40 guests. The venue is booked too."
        ),
        "{texts:?}"
    );
}

#[test]
fn a_bad_agent_file_is_rejected_with_file_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let agent = write(
        dir.path(),
        "agent.yaml",
        "name: x\nmodel: script:s.yaml\nsystem_prompt: hi\n",
    );
    let out = infinity(&["run", "--agent", agent.to_str().unwrap(), "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("agent.yaml") && stderr.contains("system_prompt"),
        "{stderr}"
    );

    let missing = infinity(&["run", "--agent", "no/such/agent.yaml", "hi"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/agent.yaml"));
}

#[test]
fn a_model_error_exits_non_zero_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.yaml",
        "rules:\n  - when: '^never$'\n    reply: {text: x}\n",
    );
    let agent = write(dir.path(), "agent.yaml", "name: x\nmodel: script:s.yaml\n");
    let out = infinity(&["run", "--agent", agent.to_str().unwrap(), "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no rule matched the text \\\"hello\\\"")
            || stdout.contains("no rule matched the text \"hello\""),
        "{stdout}"
    );
}

#[test]
fn a_sleep_beyond_the_timeout_ends_the_run_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.yaml", "rules:\n  - when: '^nap$'\n    reply: {tool_calls: [{name: sleep, args: {seconds: 3600}}]}\n");
    let agent = write(dir.path(), "agent.yaml", "name: x\nmodel: script:s.yaml\n");
    let out = infinity(&[
        "run",
        "--agent",
        agent.to_str().unwrap(),
        "--timeout",
        "2",
        "nap",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sleeps until") && stderr.contains("after the 2s timeout"),
        "{stderr}"
    );
}

/// A thread that keeps itself busy (a 50 ms sleep in a loop) does nothing wrong: at the
/// deadline the run stops cleanly, says what is still running, and exits 2; with `--store` the
/// next run goes on from there.
#[test]
fn a_run_that_times_out_with_live_work_stops_cleanly_and_the_next_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.yaml",
        "rules:\n  - reply: {tool_calls: [{name: sleep, args: {seconds: 0.05}}]}\n",
    );
    let agent = write(dir.path(), "agent.yaml", "name: x\nmodel: script:s.yaml\n");
    let store = dir.path().join("state");
    let (agent, store) = (agent.to_str().unwrap(), store.to_str().unwrap());
    let run = |more: &[&str]| {
        let mut args = vec!["run", "--agent", agent, "--store", store, "--timeout", "2"];
        args.extend_from_slice(more);
        infinity(&args)
    };
    let first = run(&["--thread", "loop", "go"]);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("timed out after 2s with work still running: thread loop")
            && stderr.contains("the next run with --store"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("ERROR") && !stderr.contains("slice failed"),
        "{stderr}"
    );
    let woke = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .matches("<- sleep")
            .count()
    };
    assert!(woke(&first) > 0);
    // The next run takes the wake-up that was left waiting, and the thread goes on.
    let second = run(&["--thread", "loop", "again"]);
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert_eq!(
        second.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(stdout.contains("<- sleep: Slept until"), "{stdout}");
    assert!(woke(&second) > 1, "{stdout}");
}

/// Traps a new user falls into, each now said at once: an approval rule for a tool the agent
/// does not have (refused, naming it), a dollar budget on a model without prices (a warning when
/// the agent loads), and an approval under `run`, where nobody can be asked (the model is told
/// exactly that, not that a person said no).
#[test]
fn an_agent_file_that_cannot_do_what_it_says_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.yaml",
        "rules:\n  - when: '^name it$'\n    reply: {tool_calls: [{name: set_title, args: {title: T}}]}\n  - reply: {text: ok}\n",
    );
    let typo = write(
        dir.path(),
        "typo.yaml",
        "name: t\nmodel: script:s.yaml\napprovals:\n  - {tools: [set_titel]}\n",
    );
    let out = infinity(&["run", "--agent", typo.to_str().unwrap(), "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the approvals rule for `set_titel` names a tool this agent does not have")
            && stderr.contains("set_title"),
        "{stderr}"
    );
    let unpriced = write(
        dir.path(),
        "budget.yaml",
        "name: b\nmodel: script:s.yaml\nlimits: {conversation_budget_usd: 5}\n\
         approvals:\n  - {tools: [set_title]}\n",
    );
    let store = dir.path().join("state");
    let store = store.to_str().unwrap();
    let out = infinity(&[
        "run",
        "--agent",
        unpriced.to_str().unwrap(),
        "--store",
        store,
        "--thread",
        "b1",
        "--json",
        "name it",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("has a budget of $5.00")
            && stderr.contains("has no prices")
            && stderr.contains("never stops them"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .contains("Not run: this call needs a person's approval, and nobody can give one here")
            && !stdout.contains("the person asked did not approve"),
        "{stdout}"
    );
    // `status` says what the budget does not count.
    let status = infinity(&["status", "b1", "--store", store]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("note    the budget of $5.00 does not count 2 of its 2 completion(s)"),
        "{stdout}"
    );
}

#[test]
fn chat_keeps_its_threads_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.yaml", "rules:\n  - when: '^title (.*)'\n    reply: {tool_calls: [{name: set_title, args: {title: '$1'}}]}\n  - reply: {text: 'hello back'}\n");
    let agent = write(dir.path(), "agent.yaml", "name: x\nmodel: script:s.yaml\n");
    let store = dir.path().join("store");
    let chat = |input: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args([
                "chat",
                "--agent",
                agent.to_str().unwrap(),
                "--store",
                store.to_str().unwrap(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let first = chat("title Groceries\n/quit\n");
    assert!(first.status.success());
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("title: Groceries"), "{stdout}");
    // A second `infinity chat` finds the thread, its title and its history.
    let second = chat("/threads\nhi again\n");
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(stdout.contains("chat \"Groceries\" [idle]"), "{stdout}");
    assert!(stdout.contains("assistant: hello back"), "{stdout}");
    let listing = infinity(&["threads", "--store", store.to_str().unwrap()]);
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("chat \"Groceries\""), "{listing}");
}

#[test]
fn run_prints_the_finish_output_last_and_exits_with_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.yaml",
        "rules:\n  - when: '^ok$'\n    reply: {tool_calls: [{name: finish, args: {status: succeeded, result: {n: 7}}}]}\n  - when: '^fail$'\n    reply: {tool_calls: [{name: finish, args: {status: failed, result: broken}}]}\n  - reply: {text: done}\n",
    );
    let agent = write(
        dir.path(),
        "agent.yaml",
        "name: x\nmodel: script:s.yaml\noutput_schema: {type: object, required: [n]}\n",
    );
    let out = infinity(&["run", "--agent", agent.to_str().unwrap(), "--json", "ok"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "output");
    assert_eq!(last["status"], "succeeded");
    assert_eq!(last["result"], serde_json::json!({"n": 7}));

    let out = infinity(&["run", "--agent", agent.to_str().unwrap(), "fail"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.trim_end().ends_with("output: \"broken\""),
        "{stdout}"
    );

    let bad = write(
        dir.path(),
        "bad.yaml",
        "name: x\nmodel: script:s.yaml\noutput_schema: {type: 12}\n",
    );
    let out = infinity(&["run", "--agent", bad.to_str().unwrap(), "ok"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("key `output_schema`"),
        "{stderr}"
    );
}

#[test]
fn runs_sharing_a_store_take_turns_and_lose_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let agent = write(
        dir.path(),
        "echo.yaml",
        "name: echo\nmodel: script:echo.script.yaml\n",
    );
    write(
        dir.path(),
        "echo.script.yaml",
        "rules:\n  - when: '(msg .*)'\n    reply: {text: 'got $1'}\n",
    );
    let runs: Vec<_> = (0..6)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_infinity"))
                .args(["run", "--agent"])
                .arg(&agent)
                .arg("--store")
                .arg(&store)
                .args(["--thread", "shared", "--timeout", "60"])
                .arg(format!("msg {i}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = runs
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for out in &outputs {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let entries = std::fs::read_to_string(store.join("threads/shared/entries.jsonl")).unwrap();
    for i in 0..6 {
        assert!(
            entries.contains(&format!("\"msg {i}\"")),
            "msg {i} lost:\n{entries}"
        );
        assert!(
            entries.contains(&format!("got msg {i}")),
            "msg {i} unanswered"
        );
    }
    // While one process holds the store, chat refuses at once and names it.
    let mut holder = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["chat", "--agent"])
        .arg(&agent)
        .arg("--store")
        .arg(&store)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let second = infinity(&[
        "chat",
        "--agent",
        agent.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
    ]);
    holder.kill().unwrap();
    let _ = holder.wait();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        err.contains("is in use by process") && err.contains("infinity"),
        "{err}"
    );
    // Listing reads without taking the store.
    let listed = infinity(&["threads", "--store", store.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("shared"));
}

#[test]
fn listing_a_mistyped_store_is_an_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let out = infinity(&["threads", "--store", typo.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no store here"), "{err}");
    assert!(!typo.exists());
}

/// `run --store` with no tool servers waits for no tool server's late callback (its grace is
/// for those), and its `usage:` line counts what this run used, not the whole store.
#[test]
fn successive_runs_on_a_store_report_their_own_usage_and_wait_no_grace() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let agent = write(dir.path(), "a.yaml", "name: a\nmodel: script:s.yaml\n");
    write(dir.path(), "s.yaml", "rules:\n  - reply: {text: 'ok'}\n");
    for turn in 0..3 {
        let started = std::time::Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(["run", "--agent"])
            .arg(&agent)
            .arg("--store")
            .arg(&store)
            // A grace that applied would hold every run for 30 s.
            .args(["--thread", "t", "--grace", "30", "--timeout", "60", "hi"])
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "turn {turn}: {stderr}");
        assert!(
            stderr.contains("usage: 1 completions"),
            "turn {turn} ran one completion: {stderr}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "turn {turn} waited a grace with no tool servers: {:?}",
            started.elapsed()
        );
    }
}

/// `serve --help` shows both ways to start it: `--agent` is not required with `--aws`.
/// A conversation at its budget: `run` says what stopped it and what it cost; `threads` shows
/// the totals; `run --budget-usd` raises the budget and the kept message is answered.
#[test]
fn a_run_stops_at_the_budget_and_goes_on_when_a_person_raises_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // Ten dollars a token (0 output tokens from a script): the first answer passes $5.
    let agent = write(
        dir.path(),
        "a.yaml",
        "name: a\nmodel: script:s.yaml\nprices: {input: 10000000, output: 0}\n\
         limits: {conversation_budget_usd: 5}\n",
    );
    write(dir.path(), "s.yaml", "rules:\n  - reply: {text: 'ok'}\n");
    let run = |extra: &[&str], message: &str| {
        let mut args = vec![
            "run",
            "--agent",
            agent.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--thread",
            "t",
        ];
        args.extend_from_slice(extra);
        args.push(message);
        let out = infinity(&args);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (_, _, err) = run(&[], "hello");
    assert!(err.contains("usage: 1 completions"), "{err}");
    assert!(err.contains("cost $10.00 (this run)"), "{err}");
    let (ok, out, err) = run(&[], "and now?");
    assert!(!ok, "a message the budget stops is an error: {out}{err}");
    assert!(
        out.contains("Stopped: this conversation has spent $10.00 of its $5.00 budget"),
        "{out}"
    );
    assert!(err.contains("usage: 0 completions"), "{err}");
    let listed = infinity(&["threads", "--store", store.to_str().unwrap()]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("t [stopped: budget reached]"), "{listed}");
    assert!(
        listed
            .contains("conversation: 1 completions, 1 tokens, $10.00; budget $5.00 (the agent's)"),
        "{listed}"
    );
    let (ok, out, err) = run(&["--budget-usd", "100"], "go on");
    assert!(ok, "{out}{err}");
    assert!(err.contains("set the budget of conversation t"), "{err}");
    assert!(out.contains("assistant: ok"), "{out}");
    let listed = infinity(&["threads", "--store", store.to_str().unwrap()]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("t [idle]"), "{listed}");
    assert!(
        listed.contains("budget $100.00 (set by a person)"),
        "{listed}"
    );
}

#[test]
fn serve_help_shows_agent_and_aws_as_alternatives() {
    let out = infinity(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("infinity serve --agent FILE") && help.contains("infinity serve --aws"),
        "{help}"
    );
}

#[test]
fn status_says_what_would_wake_each_thread_and_flags_a_stuck_one() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.yaml",
        "rules:\n  - thread: child\n    reply: {text: \"done, but I never report\"}\n  - when: '^go$'\n    reply:\n      tool_calls:\n        - {name: spawn_thread, args: {instructions: quick, child_of: \"${stack}\"}}\n        - {name: sleep, args: {seconds: 3600}}\n  - reply: {text: ok}\n",
    );
    let agent = write(dir.path(), "agent.yaml", "name: x\nmodel: script:s.yaml\n");
    let store = dir.path().join("st");
    let store = store.to_str().unwrap();
    let agent = agent.to_str().unwrap();
    let out = infinity(&[
        "run",
        "--agent",
        agent,
        "--store",
        store,
        "--thread",
        "t",
        "--timeout",
        "2",
        "go",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = infinity(&["status", "t", "--store", store]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a stuck thread: exit 1\n{stdout}"
    );
    assert!(stdout.starts_with("t (agent x): waits on"), "{stdout}");
    assert!(stdout.contains("  timer   sleep fires "), "{stdout}");
    assert!(stdout.contains("still running"), "{stdout}");
    assert!(
        stdout.contains(": STUCK: open, started by another thread"),
        "{stdout}"
    );
    // The same as JSON; an unknown thread is an error naming it.
    let out = infinity(&["status", "t", "--store", store, "--json"]);
    let threads: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(threads[0]["timers"][0]["tool"], "sleep");
    assert!(threads[1]["stuck"].is_string(), "{threads}");
    let out = infinity(&["status", "nobody", "--store", store]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no thread nobody"));
}
