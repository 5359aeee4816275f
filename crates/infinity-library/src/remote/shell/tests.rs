use super::*;

/// Each simple command as its words joined by spaces, then its redirections.
fn read(command: &str) -> Vec<String> {
    parse(command)
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
        .iter()
        .map(|s| {
            let mut parts = s.words.clone();
            parts.extend(s.redirects.iter().map(|r| format!("[{r}]")));
            parts.join(" ")
        })
        .collect()
}

fn refused(command: &str) -> String {
    match parse(command) {
        Ok(found) => panic!("{command:?} was read as {found:?}"),
        Err(why) => why,
    }
}

#[test]
fn lists_and_pipelines_are_split_into_simple_commands() {
    assert_eq!(
        read("a 1; b && c || d | e & f |& g\nh"),
        ["a 1", "b", "c", "d", "e", "f", "g", "h"]
    );
    assert_eq!(read("  ls   -la  "), ["ls -la"]);
    assert_eq!(read("(a; b) && { c; }"), ["a", "b", "c"]);
    assert_eq!(read("! a | b"), ["a", "b"]);
    assert_eq!(read("a # b; rm -rf /"), ["a"]);
    assert_eq!(read("a#b"), ["a#b"]);
    assert!(read("").is_empty());
}

#[test]
fn quotes_and_escapes_keep_their_text_together() {
    assert_eq!(read("echo 'a; b' \"c && d\""), ["echo 'a; b' \"c && d\""]);
    assert_eq!(read("echo a\\;b"), ["echo a\\;b"]);
    assert_eq!(read("echo a\\ b"), ["echo a\\ b"]);
    // A `\`-newline joins lines before anything else.
    assert_eq!(read("ec\\\nho hi"), ["echo hi"]);
    assert_eq!(read("echo hi \\\n; rm x"), ["echo hi", "rm x"]);
    assert_eq!(
        read("echo \"$HOME\" ${X:-y} $'\\e[2J'"),
        ["echo \"$HOME\" ${X:-y} $'\\e[2J'"]
    );
}

#[test]
fn substitutions_are_read_as_commands_of_their_own() {
    assert_eq!(read("echo $(date)"), ["date", "echo $(date)"]);
    assert_eq!(
        read("echo \"$(rm -rf x)\""),
        ["rm -rf x", "echo \"$(rm -rf x)\""]
    );
    assert_eq!(read("echo `id`"), ["id", "echo `id`"]);
    assert_eq!(read("echo \"`id`\""), ["id", "echo \"`id`\""]);
    assert_eq!(read("echo ${X:-$(id)}"), ["id", "echo ${X:-$(id)}"]);
    assert_eq!(
        read("diff <(ls a) >(wc)"),
        ["ls a", "wc", "diff <(ls a) >(wc)"]
    );
    assert_eq!(
        read("echo $(echo $(id))"),
        ["id", "echo $(id)", "echo $(echo $(id))"]
    );
    assert_eq!(
        read("echo `echo \\`id\\``"),
        ["id", "echo `id`", "echo `echo \\`id\\``"]
    );
    // Single quotes hide everything.
    assert_eq!(read("echo '$(id)'"), ["echo '$(id)'"]);
}

#[test]
fn redirections_are_found_whatever_their_form() {
    assert_eq!(
        read("echo hi > F >> G >| H &> I &>> J < K <> L"),
        ["echo hi [> F] [>> G] [>| H] [&> I] [&>> J] [< K] [<> L]"]
    );
    assert_eq!(
        read("a 2>&1 >&2 2>/dev/null <&- 10>x"),
        ["a [2>&1] [>&2] [2> /dev/null] [<&-] [10> x]"]
    );
    assert_eq!(read("echo hi>F"), ["echo hi [> F]"]);
    assert_eq!(
        read("echo a2>F"),
        ["echo a2 [> F]"],
        "digits inside a word are no fd"
    );
    assert_eq!(read("> F"), ["[> F]"]);
    assert_eq!(read("{ a; } > F"), ["a", "[> F]"]);
    assert_eq!(read("(a) 2>&1"), ["a", "[2>&1]"]);
    assert_eq!(read("cat <<< \"$(id)\""), ["id", "cat [<<< \"$(id)\"]"]);
}

#[test]
fn here_documents_are_read_with_their_bodies() {
    assert_eq!(read("cat <<EOF\nhi; rm x\nEOF\nls"), ["cat [<< EOF]", "ls"]);
    assert_eq!(read("cat <<-'E'\n\t$(id)\n\tE"), ["cat [<<- 'E']"]);
    assert!(refused("cat <<EOF\n$(id)\nEOF").contains("command substitution"));
    assert!(refused("cat <<EOF\n`id`\nEOF").contains("command substitution"));
    assert!(refused("cat <<EOF\nno end").contains("no closing line"));
    assert!(refused("cat <<EOF").contains("no body"));
}

#[test]
fn every_short_line_of_shell_punctuation_is_read_or_refused_without_panicking() {
    // Every string of up to four of these characters: no panic, no endless loop.
    let alphabet: Vec<char> = "a2 \n;&|<>()${}`'\"\\#!-=*".chars().collect();
    let mut lines = vec![String::new()];
    for _ in 0..4 {
        let longer: Vec<String> = lines
            .iter()
            .flat_map(|l| alphabet.iter().map(move |c| format!("{l}{c}")))
            .collect();
        for line in &longer {
            let _ = parse(line);
        }
        lines = longer;
    }
}

#[test]
fn what_the_reader_does_not_understand_is_refused_with_a_reason() {
    for (command, why) in [
        ("echo 'open", "never closed"),
        ("echo \"open", "never closed"),
        ("echo $(open", "never closed"),
        ("echo `open", "never closed"),
        ("echo ${open", "never closed"),
        ("(a", "never closed"),
        ("{ a;", "never closed"),
        ("a)", "closes nothing"),
        ("}", "closes nothing"),
        ("if true; then rm x; fi", "keyword `if`"),
        ("for f in *; do rm $f; done", "keyword `for`"),
        ("while :; do :; done", "keyword `while`"),
        ("case x in x) rm y;; esac", "keyword `case`"),
        ("function f { rm x; }", "keyword `function`"),
        ("f() { rm x; }; f", "function definition"),
        ("echo $((1 + $(id)))", "arithmetic"),
        ("echo >", "no target"),
        ("echo > ;", "no target"),
        ("(a) b", "after `)`"),
        ("echo \\", "very end"),
        ("a 99999999999>x", "too large"),
        ("(".repeat(50_000).as_str(), "nest more than 64"),
        ("echo $(".repeat(10_000).as_str(), "nest more than 64"),
        ("{ ".repeat(10_000).as_str(), "nest more than 64"),
    ] {
        let got = refused(command);
        assert!(got.contains(why), "{command:?}: {got}");
    }
}
