//! A command line read the way `sh -c` reads it, far enough for the `remote_allow:` rules: every
//! simple command it runs (those inside `( )`, `{ }`, `$( )`, backquotes and `<( )` / `>( )`
//! included) and every redirection, each as written. Whatever this reader does not fully
//! understand (a compound command such as `if`, arithmetic, an unclosed quote) is an error that
//! names it, and the caller asks a person: being wrong must only ever mean asking too often.

/// One simple command: its words as written (quotes kept, only `\`-newline continuations
/// removed, since the shell removes them before anything else) and its redirections. A group's
/// redirections (`{ a; b; } > f`) are a simple command with no words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Simple {
    pub(crate) words: Vec<String>,
    pub(crate) redirects: Vec<Redirect>,
}

/// A redirection: `[fd]op target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// The file descriptor written before the operator, if any.
    pub(crate) fd: Option<u32>,
    pub(crate) op: Op,
    /// The file (or fd for `>&`, `<&`) as written; a here-document's delimiter; a here-string's
    /// word.
    pub(crate) target: String,
}

/// The redirection operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `<`
    In,
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `&>`
    OutErr,
    /// `&>>`
    AppendOutErr,
    /// `<&`
    DupIn,
    /// `>&`
    DupOut,
    /// `<<`
    HereDoc,
    /// `<<-`
    HereDocTabs,
    /// `<<<`
    HereString,
}

impl Op {
    /// Longest first, so that `>>` is not read as `>`.
    const ALL: [(&'static str, Op); 12] = [
        ("&>>", Op::AppendOutErr),
        ("<<<", Op::HereString),
        ("<<-", Op::HereDocTabs),
        ("&>", Op::OutErr),
        ("<<", Op::HereDoc),
        ("<>", Op::ReadWrite),
        ("<&", Op::DupIn),
        (">>", Op::Append),
        (">|", Op::Clobber),
        (">&", Op::DupOut),
        ("<", Op::In),
        (">", Op::Out),
    ];

    pub(crate) fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("?", |(text, _)| text)
    }

    /// The fd the operator changes when none is written (`&>` changes two, and takes none).
    pub(crate) fn default_fd(self) -> Option<u32> {
        match self {
            Op::In | Op::ReadWrite | Op::DupIn | Op::HereDoc | Op::HereDocTabs | Op::HereString => {
                Some(0)
            }
            Op::Out | Op::Append | Op::Clobber | Op::DupOut => Some(1),
            Op::OutErr | Op::AppendOutErr => None,
        }
    }

    /// The operator `text` starts with, and its length.
    pub(crate) fn at_start(text: &str) -> Option<(Op, usize)> {
        Self::ALL
            .iter()
            .find(|(written, _)| text.starts_with(written))
            .map(|(written, op)| (*op, written.len()))
    }
}

impl Redirect {
    /// The fd it changes (`None` for `&>`, which changes stdout and stderr).
    pub(crate) fn effective_fd(&self) -> Option<u32> {
        self.fd.or(self.op.default_fd())
    }
}

impl std::fmt::Display for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(fd) = self.fd {
            write!(f, "{fd}")?;
        }
        write!(f, "{}", self.op.as_str())?;
        if matches!(self.op, Op::DupIn | Op::DupOut) {
            write!(f, "{}", self.target)
        } else {
            write!(f, " {}", self.target)
        }
    }
}

/// Words that start a compound command or change how the rest is read; rules match simple
/// commands only.
const KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "coproc", "time", "[[", "]]",
];

/// How deeply groups and substitutions may nest (the reader recurses; a command may be 100,000
/// characters of `(`).
const MAX_DEPTH: usize = 64;

/// The simple commands and redirections of `command`, or what could not be read.
pub(crate) fn parse(command: &str) -> Result<Vec<Simple>, String> {
    parse_nested(command, 0)
}

fn parse_nested(command: &str, depth: usize) -> Result<Vec<Simple>, String> {
    let mut reader = Reader {
        chars: command.chars().collect(),
        pos: 0,
        found: Vec::new(),
        here_docs: Vec::new(),
        depth,
    };
    reader.list(End::Input)?;
    if let Some(doc) = reader.here_docs.first() {
        return Err(format!(
            "the here-document `<<{}` has no body and no closing line",
            doc.delimiter
        ));
    }
    Ok(reader.found)
}

/// What ends the list being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Input,
    /// `)`: a subshell, `$( )`, `<( )` or `>( )`.
    Paren,
    /// A `}` word in command position.
    Brace,
}

/// A here-document whose body starts at the next newline.
#[derive(Debug)]
struct HereDoc {
    delimiter: String,
    strip_tabs: bool,
    /// A quoted delimiter (`<<'EOF'`): the body is taken as it is, with no expansion.
    quoted: bool,
}

#[derive(Debug)]
struct Reader {
    chars: Vec<char>,
    pos: usize,
    /// Every simple command read so far, nested ones included.
    found: Vec<Simple>,
    here_docs: Vec<HereDoc>,
    /// How many lists enclose the one being read.
    depth: usize,
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Characters that end an unquoted word.
fn ends_word(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn rest(&self) -> String {
        self.chars[self.pos.min(self.chars.len())..]
            .iter()
            .collect()
    }

    /// Skips blanks and `\`-newline continuations.
    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(c) if is_blank(c) => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    /// Reads commands separated by `;`, `&`, `&&`, `||`, `|`, `|&` and newlines until `end`.
    fn list(&mut self, end: End) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "groups and substitutions nest more than {MAX_DEPTH} deep"
            ));
        }
        let result = self.list_body(end);
        self.depth -= 1;
        result
    }

    fn list_body(&mut self, end: End) -> Result<(), String> {
        let mut current = Simple::default();
        // After `)` or `}` only redirections and separators may follow.
        let mut after_group = false;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                return match end {
                    End::Input => {
                        self.finish(&mut current);
                        Ok(())
                    }
                    End::Paren => Err("a `(` is never closed".to_owned()),
                    End::Brace => Err("a `{` is never closed".to_owned()),
                };
            };
            let command_position = current.words.is_empty() && !after_group;
            match c {
                '#' => {
                    // A comment, to the end of the line.
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '\n' => {
                    self.pos += 1;
                    self.finish(&mut current);
                    after_group = false;
                    self.here_doc_bodies()?;
                }
                ';' => {
                    if self.peek_at(1) == Some(';') {
                        return Err("`;;` (a `case` statement) is not matched by rules".to_owned());
                    }
                    self.pos += 1;
                    self.finish(&mut current);
                    after_group = false;
                }
                '&' if self.peek_at(1) == Some('>') => {
                    let redirect = self.redirect(None)?;
                    current.redirects.push(redirect);
                }
                '&' | '|' => {
                    self.pos += 1;
                    if matches!(self.peek(), Some(next) if next == c || (c == '|' && next == '&')) {
                        self.pos += 1;
                    }
                    self.finish(&mut current);
                    after_group = false;
                }
                '(' if command_position && current.redirects.is_empty() => {
                    self.pos += 1;
                    self.list(End::Paren)?;
                    after_group = true;
                }
                '(' => {
                    return Err(
                        "a `(` after a word (a function definition?) is not matched by rules"
                            .to_owned(),
                    )
                }
                ')' => {
                    if end != End::Paren {
                        return Err("a `)` closes nothing".to_owned());
                    }
                    self.pos += 1;
                    self.finish(&mut current);
                    return Ok(());
                }
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    if after_group {
                        return Err("a word after `)` or `}`".to_owned());
                    }
                    let word = self.word()?;
                    current.words.push(word);
                }
                '<' | '>' => {
                    let redirect = self.redirect(None)?;
                    current.redirects.push(redirect);
                }
                _ => {
                    let start = self.pos;
                    let word = self.word()?;
                    // `2>file`: digits just before the operator are its fd.
                    if matches!(self.peek(), Some('<' | '>'))
                        && self.peek_at(1) != Some('(')
                        && !word.is_empty()
                        && word.chars().all(|c| c.is_ascii_digit())
                        && self.pos - start == word.len()
                    {
                        let fd = word
                            .parse::<u32>()
                            .map_err(|_| format!("the file descriptor `{word}` is too large"))?;
                        let redirect = self.redirect(Some(fd))?;
                        current.redirects.push(redirect);
                        continue;
                    }
                    if after_group {
                        return Err(format!("the word `{word}` after `)` or `}}`"));
                    }
                    if command_position {
                        match word.as_str() {
                            "{" => {
                                if !current.redirects.is_empty() {
                                    return Err("a redirection before `{`".to_owned());
                                }
                                self.list(End::Brace)?;
                                after_group = true;
                                continue;
                            }
                            "}" if end == End::Brace => {
                                self.finish(&mut current);
                                return Ok(());
                            }
                            "}" => return Err("a `}` closes nothing".to_owned()),
                            // `! cmd` only negates the exit status.
                            "!" if current.redirects.is_empty() => continue,
                            keyword if KEYWORDS.contains(&keyword) => {
                                return Err(format!(
                                    "the shell keyword `{keyword}` starts a compound command, \
                                     which rules do not match"
                                ));
                            }
                            _ => {}
                        }
                    }
                    current.words.push(word);
                }
            }
        }
    }

    fn finish(&mut self, current: &mut Simple) {
        if !current.words.is_empty() || !current.redirects.is_empty() {
            self.found.push(std::mem::take(current));
        }
    }

    /// A redirection at the operator (its fd, if any, already read).
    fn redirect(&mut self, fd: Option<u32>) -> Result<Redirect, String> {
        let (op, len) = Op::at_start(&self.rest())
            .ok_or_else(|| "a redirection operator the reader does not know".to_owned())?;
        if fd.is_some() && matches!(op, Op::OutErr | Op::AppendOutErr) {
            return Err(format!("`{}` after a file descriptor", op.as_str()));
        }
        self.pos += len;
        self.skip_blanks();
        if self.peek().is_some_and(ends_word) || self.peek().is_none() {
            return Err(format!("the redirection `{}` has no target", op.as_str()));
        }
        let target = self.word()?;
        if matches!(op, Op::HereDoc | Op::HereDocTabs) {
            if target.contains(['$', '`']) {
                return Err(format!(
                    "the here-document delimiter `{target}` has an expansion in it"
                ));
            }
            let quoted = target.contains(['\'', '"', '\\']);
            self.here_docs.push(HereDoc {
                delimiter: target
                    .chars()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect(),
                strip_tabs: op == Op::HereDocTabs,
                quoted,
            });
        }
        Ok(Redirect { fd, op, target })
    }

    /// Reads the bodies of the here-documents opened on the line just ended. An unquoted
    /// delimiter lets the shell expand the body; a body with command substitution in it asks.
    fn here_doc_bodies(&mut self) -> Result<(), String> {
        for doc in std::mem::take(&mut self.here_docs) {
            let mut closed = false;
            while self.pos < self.chars.len() {
                let mut line = String::new();
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let compared = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if compared == doc.delimiter {
                    closed = true;
                    break;
                }
                if !doc.quoted && (line.contains("$(") || line.contains('`')) {
                    return Err(format!(
                        "the here-document `<<{}` has command substitution in its body",
                        doc.delimiter
                    ));
                }
            }
            if !closed {
                return Err(format!(
                    "the here-document `<<{}` has no closing line",
                    doc.delimiter
                ));
            }
        }
        Ok(())
    }

    /// A word as written, reading any substitution in it as commands of its own.
    fn word(&mut self) -> Result<String, String> {
        let mut raw = String::new();
        while let Some(c) = self.peek() {
            match c {
                '<' | '>' if raw.is_empty() && self.peek_at(1) == Some('(') => {
                    // Process substitution: `<(cmd)`, `>(cmd)`.
                    let start = self.pos;
                    self.pos += 2;
                    self.list(End::Paren)?;
                    raw.extend(&self.chars[start..self.pos]);
                }
                c if ends_word(c) => break,
                '\\' => match self.peek_at(1) {
                    Some('\n') => self.pos += 2,
                    Some(next) => {
                        raw.push('\\');
                        raw.push(next);
                        self.pos += 2;
                    }
                    None => return Err("a `\\` at the very end".to_owned()),
                },
                '\'' => {
                    self.pos += 1;
                    raw.push('\'');
                    loop {
                        match self.peek() {
                            None => return Err("a `'` is never closed".to_owned()),
                            Some(c) => {
                                self.pos += 1;
                                raw.push(c);
                                if c == '\'' {
                                    break;
                                }
                            }
                        }
                    }
                }
                '"' => {
                    self.pos += 1;
                    raw.push('"');
                    self.double_quoted(&mut raw)?;
                }
                '$' => self.dollar(&mut raw)?,
                '`' => self.backquoted(&mut raw)?,
                c => {
                    self.pos += 1;
                    raw.push(c);
                }
            }
        }
        Ok(raw)
    }

    /// The rest of a `"..."`, its closing quote included.
    fn double_quoted(&mut self, raw: &mut String) -> Result<(), String> {
        loop {
            match self.peek() {
                None => return Err("a `\"` is never closed".to_owned()),
                Some('"') => {
                    self.pos += 1;
                    raw.push('"');
                    return Ok(());
                }
                Some('\\') => match self.peek_at(1) {
                    Some('\n') => self.pos += 2,
                    Some(next) => {
                        raw.push('\\');
                        raw.push(next);
                        self.pos += 2;
                    }
                    None => return Err("a `\"` is never closed".to_owned()),
                },
                Some('$') => self.dollar(raw)?,
                Some('`') => self.backquoted(raw)?,
                Some(c) => {
                    self.pos += 1;
                    raw.push(c);
                }
            }
        }
    }

    /// An expansion at `$`: `$(cmd)` read as commands, `${...}` and `$name` kept, `$'...'`
    /// (bash's quoting) kept whole.
    fn dollar(&mut self, raw: &mut String) -> Result<(), String> {
        let start = self.pos;
        match self.peek_at(1) {
            Some('(') if self.peek_at(2) == Some('(') => {
                Err("arithmetic expansion `$((...))` is not matched by rules".to_owned())
            }
            Some('(') => {
                self.pos += 2;
                self.list(End::Paren)?;
                raw.extend(&self.chars[start..self.pos]);
                Ok(())
            }
            Some('{') => {
                self.pos += 2;
                raw.push_str("${");
                loop {
                    match self.peek() {
                        None => return Err("a `${` is never closed".to_owned()),
                        Some('}') => {
                            self.pos += 1;
                            raw.push('}');
                            return Ok(());
                        }
                        Some('\\') => match self.peek_at(1) {
                            Some(next) => {
                                raw.push('\\');
                                raw.push(next);
                                self.pos += 2;
                            }
                            None => return Err("a `${` is never closed".to_owned()),
                        },
                        Some('\'') => {
                            // Inside `${...}` quotes nest; read them as in a word.
                            let word_start = self.pos;
                            self.pos += 1;
                            while self.peek().is_some_and(|c| c != '\'') {
                                self.pos += 1;
                            }
                            if self.peek().is_none() {
                                return Err("a `'` is never closed".to_owned());
                            }
                            self.pos += 1;
                            raw.extend(&self.chars[word_start..self.pos]);
                        }
                        Some('"') => {
                            self.pos += 1;
                            raw.push('"');
                            self.double_quoted(raw)?;
                        }
                        Some('$') => self.dollar(raw)?,
                        Some('`') => self.backquoted(raw)?,
                        Some(c) => {
                            self.pos += 1;
                            raw.push(c);
                        }
                    }
                }
            }
            Some('\'') => {
                self.pos += 2;
                raw.push_str("$'");
                loop {
                    match self.peek() {
                        None => return Err("a `$'` is never closed".to_owned()),
                        Some('\\') if self.peek_at(1).is_some() => {
                            raw.extend(&self.chars[self.pos..self.pos + 2]);
                            self.pos += 2;
                        }
                        Some(c) => {
                            self.pos += 1;
                            raw.push(c);
                            if c == '\'' {
                                return Ok(());
                            }
                        }
                    }
                }
            }
            _ => {
                self.pos += 1;
                raw.push('$');
                Ok(())
            }
        }
    }

    /// A `` `cmd` `` substitution: its text, unescaped as the shell does, read as commands.
    fn backquoted(&mut self, raw: &mut String) -> Result<(), String> {
        let start = self.pos;
        self.pos += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return Err("a backquote is never closed".to_owned()),
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some(next @ ('`' | '\\' | '$')) => inner.push(next),
                        Some('\n') => {}
                        Some(next) => {
                            inner.push('\\');
                            inner.push(next);
                        }
                        None => return Err("a backquote is never closed".to_owned()),
                    }
                    self.pos += 2;
                }
                Some(c) => {
                    self.pos += 1;
                    inner.push(c);
                }
            }
        }
        raw.extend(&self.chars[start..self.pos]);
        let nested = parse_nested(&inner, self.depth)?;
        self.found.extend(nested);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
