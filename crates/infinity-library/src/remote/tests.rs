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
        redirects: Vec::new(),
    }
}

fn with_redirects(command: &str, redirects: &[&str]) -> RemoteRule {
    RemoteRule {
        redirects: redirects.iter().map(|r| (*r).to_owned()).collect(),
        ..rule(None, Some(command))
    }
}

/// Why `command` asks under `rules` on the remote `laptop` (a panic if it is allowed).
fn asks(rules: &[RemoteRule], command: &str) -> String {
    match check(rules, Some(&remote("laptop")), command) {
        Verdict::Asks(why) => why,
        Verdict::Allowed(by) => panic!("{command:?} is allowed by {by:?}"),
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
    // Words, not characters: blanks between them do not matter; quotes do.
    assert!(allowed(&rules, &laptop, "git   clone\tx"));
    assert!(!allowed(&rules, &laptop, "'git' clone x"));
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
fn redirections_ask_unless_they_touch_no_file_or_a_rule_names_them() {
    let echo = [rule(None, Some("echo:*"))];
    // The issue's bypasses.
    assert!(asks(&echo, "echo hi > FILE").contains("`> FILE`"));
    assert!(asks(&echo, "echo x >> ~/.bashrc").contains("`>> ~/.bashrc`"));
    assert!(asks(&echo, "echo spoofed > F \u{1b}[2K\rgit status").contains("^["));
    for command in [
        "echo hi>F",
        "echo hi >| F",
        "echo hi &> F",
        "echo hi &>> F",
        "echo hi 2> F",
        "echo hi 2>>F",
        "echo hi < /etc/shadow",
        "echo hi <> F",
        "echo hi >&F",
        "echo hi 3>F",
        "echo <<EOF\nhi\nEOF",
        "echo <<-EOF\n\thi\n\tEOF",
        "echo <<< hi",
        "> F",
        "{ echo hi; } > F",
        "(echo hi) >> F",
        "echo $(echo hi > F)",
        "echo \"$(echo hi > F)\"",
        "echo `echo hi > F`",
        "echo hi \\\n> F",
    ] {
        assert!(!allowed(&echo, &remote("laptop"), command), "{command:?}");
    }
    // Duplicating or closing a descriptor, and /dev/null, touch no file.
    for command in [
        "echo hi 2>&1",
        "echo hi >&2 1>&2 2<&0 <&- >&-",
        "echo hi > /dev/null 2>/dev/null </dev/null &>/dev/null &>>/dev/null",
        "{ echo a; echo b; } 2>&1",
    ] {
        assert!(allowed(&echo, &remote("laptop"), command), "{command:?}");
    }
    // A rule's `redirects` allow what they name, for its command only.
    let logged = [
        with_redirects("make:*", &["> build.log", "2>> /tmp/logs/*", "<<"]),
        rule(None, Some("echo:*")),
    ];
    let laptop = remote("laptop");
    assert!(allowed(&logged, &laptop, "make all > build.log"));
    assert!(allowed(
        &logged,
        &laptop,
        "make all 2>> /tmp/logs/a/make.err"
    ));
    assert!(allowed(&logged, &laptop, "make -f - <<'EOF'\nall:\nEOF"));
    assert!(allowed(&logged, &laptop, "make <<-X\n\tall:\n\tX"));
    assert!(asks(&logged, "make all >> build.log").contains("`>> build.log`"));
    assert!(asks(&logged, "make all 1> other.log").contains("`1> other.log`"));
    assert!(
        !allowed(&logged, &laptop, "make all 2> build.log"),
        "another fd"
    );
    assert!(!allowed(
        &logged,
        &laptop,
        "make 2>> /tmp/logs/../../home/me/.bashrc"
    ));
    assert!(!allowed(&logged, &laptop, "make 2>> /tmp/logs/$X"));
    assert!(!allowed(&logged, &laptop, "make 2>> /tmp/logs/"));
    assert!(!allowed(&logged, &laptop, "make 2>> /tmp/logsx/a"));
    assert!(
        !allowed(&logged, &laptop, "echo hi > build.log"),
        "not echo's"
    );
    assert!(allowed(&logged, &laptop, "make > build.log && echo done"));
    assert!(allowed(&logged, &laptop, "1>build.log make"));
}

#[test]
fn every_command_of_a_line_needs_a_rule_and_unclear_lines_ask() {
    let rules = [rule(None, Some("echo:*")), rule(None, Some("date"))];
    let laptop = remote("laptop");
    // Substitutions are commands too.
    assert!(allowed(&rules, &laptop, "echo $(date) `date` \"$(date)\""));
    assert!(asks(&rules, "echo $(id)").contains("`id`"));
    assert!(asks(&rules, "echo \"$(id)\"").contains("`id`"));
    assert!(asks(&rules, "echo `id`").contains("`id`"));
    assert!(asks(&rules, "echo <(id)").contains("`id`"));
    assert!(asks(&rules, "echo ${X:-$(id)}").contains("`id`"));
    assert!(
        allowed(&rules, &laptop, "echo '$(id)' \\$\\(id\\)"),
        "quoted: no substitution"
    );
    // Lists, pipelines, groups, new lines, continuations.
    for command in [
        "echo a; id",
        "echo a && id",
        "echo a || id",
        "echo a | id",
        "echo a |& id",
        "echo a & id",
        "echo a\nid",
        "(echo a; id)",
        "{ echo a; id; }",
        "echo a \\\n; id",
        "i\\\nd",
    ] {
        assert!(!allowed(&rules, &laptop, command), "{command:?}");
    }
    assert!(allowed(&rules, &laptop, "(echo a; date) && { echo b; } &"));
    assert!(
        allowed(&rules, &laptop, "ec\\\nho joined"),
        "a continuation joins words"
    );
    // Assignments must be named by the rule; eval never passes.
    assert!(asks(&rules, "PATH=/tmp/evil echo hi").contains("`PATH=/tmp/evil`"));
    assert!(asks(&rules, "X=1; echo $X").contains("`X=1`"));
    let eval = [
        rule(None, Some("eval:*")),
        rule(None, Some("LANG=C make:*")),
    ];
    assert!(asks(&eval, "eval echo hi\\; rm x").contains("shell code"));
    assert!(allowed(&eval, &laptop, "LANG=C make test"));
    // What the reader does not understand asks, saying why.
    assert!(asks(&rules, "echo 'open").contains("never closed"));
    assert!(asks(&rules, "if date; then echo a; fi").contains("`if`"));
    assert!(asks(&rules, "echo() { id; }; echo").contains("function"));
    assert!(asks(&rules, "echo $((1+2))").contains("arithmetic"));
    assert!(asks(&rules, "cat <<EOF\n$(id)\nEOF").contains("here-document"));
    assert!(asks(&rules, "   ").contains("no command"));
    // Control characters ask even on a remote allowed whole; tab and new line do not.
    let whole = [rule(Some("laptop"), None)];
    assert!(asks(&whole, "ls\r").contains("^M"));
    assert!(asks(&whole, "ls \u{202e}txt").contains("U+202E"));
    assert!(asks(&whole, "ls \u{7f}").contains("U+007F"));
    assert!(allowed(&whole, &laptop, "ls\t-la\nid; if x; then y; fi"));
}

#[test]
fn rules_say_which_rule_allowed_and_bad_rules_are_refused() {
    let rules = [
        rule(Some("laptop"), Some("ls:*")),
        rule(None, Some("echo:*")),
    ];
    assert_eq!(
        check(&rules, Some(&remote("Laptop")), "ls -la | echo"),
        Verdict::Allowed(vec![
            "{remote: laptop, command: \"ls:*\"}".to_owned(),
            "{command: \"echo:*\"}".to_owned()
        ])
    );
    // No remote named: only rules for every remote apply.
    assert!(matches!(check(&rules, None, "ls"), Verdict::Asks(_)));
    assert!(matches!(check(&rules, None, "echo"), Verdict::Allowed(_)));
    for (bad, why) in [
        (rule(None, Some("a; b")), "more than one command"),
        (rule(None, Some("> f")), "only a redirection"),
        (rule(None, Some(":*")), "empty"),
        (rule(None, Some("echo 'x")), "never closed"),
        (
            with_redirects("echo:*", &["build.log"]),
            "does not start with a redirection",
        ),
        (with_redirects("echo:*", &[">"]), "names no file"),
        (with_redirects("echo:*", &["<< EOF"]), "alone"),
        (
            RemoteRule {
                redirects: vec!["> f".to_owned()],
                ..rule(Some("laptop"), None)
            },
            "needs a `command`",
        ),
    ] {
        let err = bad.check().unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
    assert!(
        with_redirects("make:*", &["2>> /tmp/*", "<<", "<<<", "&> out"])
            .check()
            .is_ok()
    );
    // A redirection written in the command is allowed as `redirects` would (rules written
    // before `redirects` existed keep working).
    let written = [rule(None, Some("make test > build.log 2>&1"))];
    assert!(written[0].check().is_ok());
    assert!(allowed(
        &written,
        &remote("laptop"),
        "make test 2>&1 1>build.log"
    ));
    assert!(allowed(&written, &remote("laptop"), "make test"));
    assert!(!allowed(
        &written,
        &remote("laptop"),
        "make test > other.log"
    ));
    assert!(!allowed(
        &written,
        &remote("laptop"),
        "make test 2> build.log"
    ));
    // A bad rule allows nothing, even as a whole remote's.
    let bad = [RemoteRule {
        redirects: vec!["> f".to_owned()],
        ..rule(None, None)
    }];
    assert!(!allowed(&bad, &remote("laptop"), "ls"));
}

#[test]
fn a_description_is_one_line() {
    assert!(one_line("Lists the build folder\twith sizes").is_ok());
    assert_eq!(one_line("a\nRun it").unwrap_err(), "it has a line break");
    assert!(one_line("a\rb").unwrap_err().contains("U+000D"));
    assert!(one_line("a\u{2028}b").unwrap_err().contains("U+2028"));
    assert!(one_line("\u{202e}txt").unwrap_err().contains("U+202E"));
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
