//! Prints output events: a readable transcript, or JSON lines.

use std::collections::HashMap;
use std::sync::Arc;

use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::history::{
    is_interruption_notice, HistoryEntry, Item, INTERRUPTED_IDLE_NOTICE,
};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::state::ThreadRecord;
pub use infinity_agent_core::tools::clip;

/// Prints a line to stdout. When stdout is gone (`infinity tail | head`), the command's output
/// has nowhere to go: exit quietly instead of failing.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        if let Err(err) = writeln!(stdout, $($arg)*) {
            if err.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            eprintln!("error: cannot write to stdout: {err}");
        }
    }};
}

/// Writes to stdout without a newline and flushes (streamed text); exits quietly on a closed pipe.
fn write_raw(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// Turns output events into lines on stdout.
#[derive(Debug)]
pub struct Renderer {
    json: bool,
    depth: HashMap<ThreadId, usize>,
    errors: usize,
    /// The thread whose model text is being streamed onto the current line.
    streaming: Option<ThreadId>,
    /// Each child seen spawned, with its parent: a child's first entries repeat the parent's
    /// turn that spawned it, and a divider says where they end.
    parents: HashMap<ThreadId, ThreadId>,
    /// The thread each tool call shown so far was made in.
    calls: HashMap<CallId, ThreadId>,
}

/// `text` safe to print on a terminal: control characters other than newline and tab (which
/// could clear the screen, retitle the window, or hide what follows) and the Unicode controls
/// that reorder text are shown in visible form (`^[` for escape, `<U+202E>`), never sent raw.
/// A model, a tool server or a message may say anything.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    infinity_agent_core::text::visible(text)
}

pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ⏎ ");
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max).collect::<String>() + "…"
    }
}

impl Renderer {
    pub fn new(json: bool) -> Self {
        Self {
            json,
            depth: HashMap::new(),
            errors: 0,
            streaming: None,
            parents: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    /// Errors seen so far.
    pub fn errors(&self) -> usize {
        self.errors
    }

    pub fn show(&mut self, event: &OutputEvent) {
        if matches!(event.kind, OutputKind::Error { .. }) {
            self.errors += 1;
        }
        if let OutputKind::ThreadSpawned { child_id } = &event.kind {
            let d = self.depth.get(&event.thread_id).copied().unwrap_or(0);
            self.depth.insert(child_id.clone(), d + 1);
            self.parents
                .insert(child_id.clone(), event.thread_id.clone());
        }
        if self.json {
            match serde_json::to_string(event) {
                Ok(line) => crate::out!("{line}"),
                Err(err) => eprintln!("error: cannot encode an event: {err}"),
            }
            return;
        }
        let indent = "  ".repeat(self.depth.get(&event.thread_id).copied().unwrap_or(0));
        let who = &event.thread_id;
        let time = event.at.strftime("%H:%M:%S");
        match &event.kind {
            OutputKind::AssistantDelta { text } => {
                if self.streaming.as_ref() != Some(who) {
                    self.end_stream();
                    write_raw(&format!("{time} {indent}[{who}] assistant: "));
                    self.streaming = Some(who.clone());
                }
                write_raw(&printable(text));
                return;
            }
            // What streamed is withdrawn: say so and end the line; the text starts over on a
            // new one.
            OutputKind::AssistantRestarted {} => {
                if self.streaming.as_ref() == Some(who) {
                    write_raw(" [broke off: asking the model again]");
                    self.end_stream();
                }
                return;
            }
            // Already shown as it streamed: end the line.
            OutputKind::AssistantText { .. } if self.streaming.as_ref() == Some(who) => {
                self.end_stream();
                return;
            }
            _ => self.end_stream(),
        }
        let line = match &event.kind {
            OutputKind::UserMessage { text } => format!("user: {text}"),
            OutputKind::AssistantText { text } | OutputKind::AssistantDelta { text } => {
                format!("assistant: {text}")
            }
            OutputKind::AssistantRestarted {} => {
                "assistant: [broke off: asking the model again]".to_owned()
            }
            OutputKind::ToolCall { name, args, .. } => format!("-> {name} {args}"),
            OutputKind::ToolResult {
                call_id,
                name,
                text,
                is_error,
                display_as,
            } => {
                let shown = crate::display::render(
                    &event.thread_id,
                    call_id,
                    display_as,
                    11 + indent.len(),
                )
                .unwrap_or_else(|| one_line(text, 160));
                format!(
                    "<- {name}{}: {shown}",
                    if *is_error { " (error)" } else { "" }
                )
            }
            OutputKind::ThreadSpawned { child_id } => format!("spawned child thread {child_id}"),
            OutputKind::ThreadClosed {} => "thread closed".to_owned(),
            OutputKind::Sleeping { until, .. } => match until {
                Some(t) => {
                    let secs = t.duration_since(event.at).as_secs_f64().round() as i64;
                    format!(
                        "sleeping until {} (in {secs}s)",
                        infinity_agent_core::history::person_time(*t)
                    )
                }
                None => "sleeping until an event or a message".to_owned(),
            },
            OutputKind::TitleChanged { title } => format!("title: {title}"),
            OutputKind::Widget { ui } => {
                let pad = " ".repeat(11 + indent.len());
                let text = infinity_agent_core::tools::internal::render_widget(ui);
                format!(
                    "widget:\n{pad}{}",
                    text.trim_end().replace('\n', &format!("\n{pad}"))
                )
            }
            OutputKind::Finished { status, result } => {
                format!(
                    "finished ({}): {result}",
                    serde_json::to_string(status)
                        .unwrap_or_default()
                        .trim_matches('"')
                )
            }
            OutputKind::PlanUpdated { checklist } => {
                let pad = " ".repeat(11 + indent.len());
                format!(
                    "plan:\n{pad}{}",
                    checklist.replace('\n', &format!("\n{pad}"))
                )
            }
            OutputKind::AuthorizationRequested { call_id, auth_url } => {
                format!("authorization needed for call {call_id}: open {auth_url} (the call waits)")
            }
            OutputKind::ChoiceRequested {
                call_id,
                prompt,
                choices,
                default,
            } => {
                let options: Vec<String> = choices
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        format!("{i}) {c}{}", if i == *default { " (default)" } else { "" })
                    })
                    .collect();
                format!("choice for call {call_id}: {prompt} {}", options.join("  "))
            }
            OutputKind::ChoiceAnswered {
                call_id,
                choice,
                by_deadline,
                ..
            } => format!(
                "choice for call {call_id} answered{}: {choice}",
                if *by_deadline { " by its deadline" } else { "" }
            ),
            OutputKind::ClientToolCall {
                call_id,
                name,
                args,
                ..
            } => format!(
                "client tool {name} {args}: call {call_id} waits for the application's result"
            ),
            OutputKind::ViewUpdated { view_type, content } => {
                if content.is_empty() {
                    format!("view {view_type} cleared")
                } else {
                    format!(
                        "view {view_type}: {}",
                        clip(&serde_json::Value::Object(content.clone()).to_string(), 200)
                    )
                }
            }
            OutputKind::Interrupted {
                nothing_in_flight: true,
                ..
            } => "interrupted by the user: nothing to interrupt (no call, question or child \
                  thread was in flight)"
                .to_owned(),
            // (A stored history has the notice only, not the count: 0 there says nothing.)
            OutputKind::Interrupted { calls, .. } => match calls {
                0 => "interrupted by the user".to_owned(),
                1 => "interrupted by the user: 1 call cancelled".to_owned(),
                n => format!("interrupted by the user: {n} calls cancelled"),
            },
            OutputKind::Error { text } => format!("ERROR: {text}"),
            OutputKind::Withdrawn { .. } => {
                "[not kept: what the slice showed above (it stopped before its commit)]".to_owned()
            }
        };
        crate::out!("{time} {indent}[{who}] {}", printable(&line));
        if let OutputKind::ToolCall { call_id, .. } = &event.kind {
            // The same call shown in the parent already: this is the child's copy of the turn
            // that spawned it, the last of what it inherits.
            let parent = self.parents.get(who);
            match self.calls.get(call_id) {
                Some(made_in) if Some(made_in) == parent => {
                    let divider = inherited_divider(made_in);
                    crate::out!("{time} {indent}[{who}] {}", printable(&divider));
                }
                Some(_) => {}
                None => {
                    self.calls.insert(call_id.clone(), who.clone());
                }
            }
        }
    }

    /// Prints a stored view of a thread (its inherited entries, then its own), with a divider
    /// where what it inherited from its parent ends.
    pub fn show_view(&mut self, record: &ThreadRecord, view: &[Arc<HistoryEntry>]) {
        let inherited = inherited_len(record, view);
        for (index, entry) in view.iter().enumerate() {
            self.show_entry(&record.id, entry.at, &entry.item);
            if index + 1 == inherited {
                if let Some(parent) = &record.parent {
                    self.end_stream();
                    let indent = "  ".repeat(self.depth.get(&record.id).copied().unwrap_or(0));
                    let time = entry.at.strftime("%H:%M:%S");
                    let divider = inherited_divider(&parent.thread_id);
                    crate::out!("{time} {indent}[{}] {}", record.id, printable(&divider));
                }
            }
        }
    }

    /// Prints an entry of a stored history (as a transcript): the events it stands for, or a
    /// notice the runtime recorded, labelled as what it is (`ERROR:` only when it is one).
    pub fn show_entry(&mut self, thread_id: &ThreadId, at: jiff::Timestamp, item: &Item) {
        if let Item::Notice {
            text,
            is_error: false,
        } = item
        {
            if !is_interruption_notice(text) {
                self.end_stream();
                let indent = "  ".repeat(self.depth.get(thread_id).copied().unwrap_or(0));
                let time = at.strftime("%H:%M:%S");
                crate::out!("{time} {indent}[{thread_id}] notice: {}", printable(text));
                return;
            }
        }
        for kind in kinds_of(item) {
            self.show(&OutputEvent::new(thread_id.clone(), at, kind));
        }
    }

    /// Ends a line of streamed text, if one is open.
    fn end_stream(&mut self) {
        if self.streaming.take().is_some() {
            write_raw("\n");
        }
    }
}

/// The line that ends what a child thread inherited from `parent`.
fn inherited_divider(parent: &ThreadId) -> String {
    format!("── above: inherited from the parent thread {parent}; this thread starts here ──")
}

/// How many entries at the start of a thread's whole view are its parent's (0 for a root): those
/// it inherited at the fork and, when its own history starts with the copy of the parent's turn
/// that spawned it (`spawn_thread`), that copy too. The web app's `inheritedCount`
/// (`web/transcript.js`) counts the same way.
pub(crate) fn inherited_len(record: &ThreadRecord, view: &[Arc<HistoryEntry>]) -> usize {
    let Some(parent) = &record.parent else {
        return 0;
    };
    let fork = usize::try_from(parent.fork_at)
        .unwrap_or(usize::MAX)
        .min(view.len());
    let copies_spawn = view.get(fork).is_some_and(|entry| {
        matches!(&entry.item, Item::Assistant { tool_calls, .. }
            if tool_calls.iter().any(|call| call.id == parent.call_id))
    });
    fork + usize::from(copies_spawn)
}

/// The output events an entry of the history stands for (to print a stored history).
pub fn kinds_of(item: &Item) -> Vec<OutputKind> {
    match item {
        Item::Message { text, .. } => vec![OutputKind::UserMessage { text: text.clone() }],
        Item::Assistant {
            text, tool_calls, ..
        } => {
            let mut kinds: Vec<OutputKind> = text
                .iter()
                .filter(|t| !t.trim().is_empty())
                .map(|t| OutputKind::AssistantText { text: t.clone() })
                .collect();
            kinds.extend(tool_calls.iter().map(|c| OutputKind::ToolCall {
                call_id: c.id.clone(),
                name: c.name.clone(),
                args: c.args.clone(),
            }));
            kinds
        }
        Item::ToolResult {
            call_id,
            name,
            text,
            is_error,
            display_as,
            ..
        } => vec![OutputKind::ToolResult {
            call_id: call_id.clone(),
            name: name.clone(),
            text: text.clone(),
            is_error: *is_error,
            display_as: display_as.clone(),
        }],
        Item::Notice {
            text,
            is_error: false,
        } if is_interruption_notice(text) => vec![OutputKind::Interrupted {
            calls: 0,
            nothing_in_flight: text == INTERRUPTED_IDLE_NOTICE,
        }],
        // (A notice that is no error has no event: see `Renderer::show_entry`.)
        Item::Notice {
            text,
            is_error: true,
        } => vec![OutputKind::Error { text: text.clone() }],
        Item::Notice { .. } => Vec::new(),
        Item::Summary { text, covers } => vec![OutputKind::AssistantText {
            text: format!("(summary of the first {covers} entries) {text}"),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_sequences_are_shown_not_sent() {
        // Clear the screen, retitle the window, ring the bell, reverse the text that follows.
        let hostile = "hi\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}txt.exe\u{9b}31m";
        let shown = printable(hostile);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert_eq!(shown, "hi^[[2J^[]0;pwned^G<U+202E>txt.exe<U+009B>31m");
        // Newlines, tabs and ordinary text pass as they are, without copying.
        let plain = "line one\n\tline two — ok";
        assert!(matches!(printable(plain), std::borrow::Cow::Borrowed(_)));
    }
}
