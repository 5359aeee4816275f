//! The conversation as the turns of a Messages-style API (Anthropic Messages, Bedrock Converse):
//! user and assistant turns of content blocks that borrow from the history's entries, for an
//! adapter to write in its provider's JSON.

use infinity_agent_core::history::{HistoryView, Image, Item, MessageSource, ToolCall};
use infinity_agent_core::ids::CallId;

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

/// A content block of a turn, borrowed from the entry it comes from. Thin references
/// (`&String`, not `&str`) keep a block at 32 bytes: a long conversation's list of them is
/// written and read on every request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Block<'a> {
    /// A model turn's text.
    Text(&'a String),
    Message {
        text: &'a String,
        from: &'a MessageSource,
    },
    Summary(&'a String),
    ToolUse(&'a ToolCall),
    ToolResult {
        call_id: &'a CallId,
        text: &'a String,
        images: &'a Vec<Image>,
        is_error: bool,
    },
}

impl Block<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }
}

/// The conversation as turns: consecutive entries of one role merge into one turn (the APIs
/// want roles to alternate), and tool results lead their user turn. The blocks of every turn
/// share one list, so the conversation costs two allocations however long it is.
#[derive(Debug)]
pub(crate) struct Turns<'a> {
    blocks: Vec<Block<'a>>,
    /// Each turn's role and the index of its first block; a turn runs to the next one's.
    starts: Vec<(Role, usize)>,
}

impl<'a> Turns<'a> {
    /// Our history as turns. Notices are for people and are left out; so is the text of a model
    /// turn that is blank.
    pub(crate) fn from_history(history: HistoryView<'a>) -> Self {
        let max_blocks = max_blocks(history);
        let mut turns = Self {
            blocks: Vec::with_capacity(max_blocks),
            starts: Vec::with_capacity(max_blocks),
        };
        for entry in history.iter() {
            match &entry.item {
                Item::Message { text, from } => {
                    turns.push(Role::User, Block::Message { text, from });
                }
                Item::Assistant {
                    text, tool_calls, ..
                } => {
                    if let Some(text) = text.as_ref().filter(|t| !t.trim().is_empty()) {
                        turns.push(Role::Assistant, Block::Text(text));
                    }
                    for call in tool_calls {
                        turns.push(Role::Assistant, Block::ToolUse(call));
                    }
                }
                Item::ToolResult {
                    call_id,
                    text,
                    is_error,
                    images,
                    ..
                } => {
                    let result = Block::ToolResult {
                        call_id,
                        text,
                        images,
                        is_error: *is_error,
                    };
                    turns.push(Role::User, result);
                }
                Item::Summary { text, .. } => turns.push(Role::User, Block::Summary(text)),
                Item::Notice { .. } => {}
            }
        }
        turns
    }

    /// The number of turns.
    pub(crate) fn turn_count(&self) -> usize {
        self.starts.len()
    }

    /// The number of blocks in all turns.
    pub(crate) fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Each turn's role and blocks, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Role, &[Block<'a>])> + '_ {
        let ends = self.starts.iter().skip(1).map(|&(_, start)| start);
        let ends = ends.chain([self.blocks.len()]);
        self.starts
            .iter()
            .zip(ends)
            .map(|(&(role, start), end)| (role, &self.blocks[start..end]))
    }

    /// Adds `block` to the last turn when it has `role`, else as a new turn. Tool results go
    /// before anything else in their user turn, as the APIs require.
    fn push(&mut self, role: Role, block: Block<'a>) {
        match self.starts.last() {
            Some(&(last, start)) if last == role => {
                if block.is_tool_result() {
                    let turn = &self.blocks[start..];
                    let at = start + turn.iter().take_while(|b| b.is_tool_result()).count();
                    self.blocks.insert(at, block);
                } else {
                    self.blocks.push(block);
                }
            }
            _ => {
                self.starts.push((role, self.blocks.len()));
                self.blocks.push(block);
            }
        }
    }
}

/// At most how many blocks `history` becomes: one per message, result and summary, one per
/// model turn's text and one per call. Counting first lets the blocks go into a list made once
/// at its final size.
fn max_blocks(history: HistoryView<'_>) -> usize {
    history
        .iter()
        .map(|entry| match &entry.item {
            Item::Assistant { tool_calls, .. } => 1 + tool_calls.len(),
            Item::Notice { .. } => 0,
            _ => 1,
        })
        .sum()
}
