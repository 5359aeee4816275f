//! The tool registry: the tools of an agent (or of a conversation's tool servers) with their
//! compiled argument schemas, and the checks every call passes before it runs.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::arguments::{argument_problems, CallRejection};
use super::{builtin_tools, internal, Tool, BUILTIN_TOOL_NAMES};
use crate::history::INJECTED_TOOL;
use crate::library::Library;
use crate::model::ToolSpec;
use crate::state::ThreadRecord;

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("tool `{name}` is registered twice{}", if *.builtin { " (it is a built-in tool; rename yours)" } else { "" })]
    Duplicate {
        /// The name.
        name: String,
        /// True when the existing one is built in.
        builtin: bool,
    },
    /// The reserved injection tool name.
    #[error("tool name `{INJECTED_TOOL}` is reserved for events the runtime injects")]
    Reserved,
    /// An application or tool-server tool has the name of an internal tool the agent has on.
    #[error("tool `{name}` has the name of an internal tool of the `{flag}` category, which this agent has on: set `internal_tools: {{{flag}: false}}` in the agent file, or rename the tool")]
    ClashesWithInternal {
        /// The tool.
        name: String,
        /// The `internal_tools` flag that turns the internal one off.
        flag: &'static str,
    },
    /// `internal_tools:` names a category the host does not have, or settings it cannot use.
    #[error(transparent)]
    Category(#[from] internal::CategoryError),
    /// An `approvals:` rule names a tool the agent does not have (and has no tool servers whose
    /// tools it could be).
    #[error("the approvals rule for `{name}` names a tool this agent does not have (its tools: {known}); fix the name, or use a pattern (`{name}*`)")]
    UnknownApproval {
        /// The name the rule gives.
        name: String,
        /// The agent's tools, for the message.
        known: String,
    },
    /// The schema does not compile.
    #[error("tool `{name}` has an invalid input schema: {reason}")]
    BadSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
}

struct Registered {
    spec: ToolSpec,
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
    /// The tool's spec depends on the host's library ([`Tool::describes_library`]).
    live: bool,
}

/// Tools with their compiled argument schemas: an agent's, or a conversation's from tool
/// servers.
pub struct ToolRegistry {
    tools: Vec<Registered>,
    by_name: HashMap<String, usize>,
    specs: Vec<ToolSpec>,
    /// Some tool's spec depends on the host's library.
    live: bool,
    /// The internal categories (`internal_tools:` flags) the agent has on: the host loads the
    /// library's shelves they read before a slice.
    categories: Vec<&'static str>,
    /// The names of its internal tools.
    internal: Vec<&'static str>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.specs.iter().map(|s| &s.name))
            .finish()
    }
}

impl ToolRegistry {
    /// A registry holding only the built-in tools.
    pub fn with_builtins() -> Self {
        let mut registry = Self::empty();
        for tool in builtin_tools() {
            // Built-in schemas are ours and compile; a failure here is a bug caught by tests.
            if let Err(err) = registry.insert(tool) {
                tracing::error!(%err, "built-in tool failed to register");
            }
        }
        registry
    }

    /// The tools of an agent: the built-ins, the internal tools its flags switch on among
    /// `categories`, then the application's tools. A flag no category has, a category's settings
    /// it cannot use, and an application tool with the name of a built-in or of an enabled
    /// internal tool are refused with an error naming what to change.
    pub fn for_agent(
        categories: &internal::Categories,
        internal: &internal::InternalTools,
        settings: &internal::ToolSettings,
        app_tools: &[Arc<dyn Tool>],
    ) -> Result<Self, RegistryError> {
        categories.check(internal)?;
        let mut registry = Self::with_builtins();
        let app_names: Vec<String> = app_tools.iter().map(|t| t.spec().name).collect();
        for made in categories.agent_tools(internal, settings) {
            let flag = made.category.flag;
            if app_names.iter().any(|n| n == made.name) {
                if made.on {
                    return Err(RegistryError::ClashesWithInternal {
                        name: made.name.to_owned(),
                        flag,
                    });
                }
                continue; // the category is off: the name is the application's
            }
            registry.insert(made.tool)?;
            registry.internal.push(made.name);
            if made.on && !registry.categories.contains(&flag) {
                registry.categories.push(flag);
            }
        }
        for tool in app_tools {
            registry.insert(Arc::clone(tool))?;
        }
        Ok(registry)
    }

    /// A registry with no tools at all.
    pub fn empty() -> Self {
        Self {
            tools: Vec::new(),
            by_name: HashMap::new(),
            specs: Vec::new(),
            live: false,
            categories: Vec::new(),
            internal: Vec::new(),
        }
    }

    /// Whether `name` is one of the agent's internal tools.
    pub fn is_internal(&self, name: &str) -> bool {
        self.internal.contains(&name)
    }

    /// Whether the agent has the internal category `flag` on (`knowledge`, `meta`, ...).
    pub fn has_category(&self, flag: &str) -> bool {
        self.categories.contains(&flag)
    }

    /// Adds a tool, compiling its argument schema.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.insert(tool)
    }

    fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let spec = tool.spec();
        if spec.name == INJECTED_TOOL {
            return Err(RegistryError::Reserved);
        }
        if self.by_name.contains_key(&spec.name) {
            return Err(RegistryError::Duplicate {
                builtin: BUILTIN_TOOL_NAMES.contains(&spec.name.as_str()),
                name: spec.name,
            });
        }
        let validator = jsonschema::validator_for(&spec.input_schema).map_err(|e| {
            RegistryError::BadSchema {
                name: spec.name.clone(),
                reason: e.to_string(),
            }
        })?;
        self.by_name.insert(spec.name.clone(), self.tools.len());
        self.specs.push(spec.clone());
        let live = tool.describes_library();
        self.live |= live;
        self.tools.push(Registered {
            spec,
            tool,
            validator,
            live,
        });
        Ok(())
    }

    /// The specs, in registration order (built-ins first).
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool with this name, if any.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i].tool)
    }

    fn offered<'r>(
        &'r self,
        record: &'r ThreadRecord,
        library: Option<&'r Library>,
    ) -> impl Iterator<Item = ToolSpec> + 'r {
        self.tools
            .iter()
            .filter(|r| r.tool.offered_to(record))
            .map(move |r| match library {
                Some(library) if r.live => r.tool.spec_in(library),
                _ => r.spec.clone(),
            })
    }

    fn all_offered(&self, record: &ThreadRecord) -> bool {
        self.tools.iter().all(|r| r.tool.offered_to(record))
    }

    /// Checks a call: a known tool, offered to this thread, with valid arguments. `Unknown` when
    /// this registry has no tool of that name.
    fn check(
        &self,
        name: &str,
        args: &serde_json::Value,
        record: &ThreadRecord,
    ) -> Result<&Arc<dyn Tool>, CallRejection> {
        let Some(&index) = self.by_name.get(name) else {
            return Err(CallRejection::Unknown(name.to_owned()));
        };
        let registered = &self.tools[index];
        if !registered.tool.offered_to(record) {
            return Err(CallRejection::NotOffered(
                registered.tool.not_offered(record),
            ));
        }
        match argument_problems(&registered.validator, args, &registered.spec.input_schema) {
            None => Ok(&registered.tool),
            Some(why) => Err(CallRejection::BadArguments(why)),
        }
    }
}

/// The tools one thread is offered: its agent's, then its conversation's from tool servers.
/// The conversation's toolset was assembled so that no name is in both.
#[derive(Debug, Clone, Copy)]
pub struct OfferedTools<'a> {
    agent: &'a ToolRegistry,
    conversation: Option<&'a ToolRegistry>,
}

impl<'a> OfferedTools<'a> {
    /// The agent's tools and, if the conversation has any, its tool servers' tools.
    pub fn new(agent: &'a ToolRegistry, conversation: Option<&'a ToolRegistry>) -> Self {
        Self {
            agent,
            conversation,
        }
    }

    /// The specs this thread is offered, in order, those that describe the host's `library`
    /// made for what it holds now: borrowed when nothing is hidden from the thread, none
    /// describes the library and the conversation has no tools of its own.
    pub fn specs_for(
        &self,
        record: &ThreadRecord,
        library: Option<&Library>,
    ) -> Cow<'a, [ToolSpec]> {
        let conversation = self.conversation.filter(|s| !s.is_empty());
        let live = library.filter(|_| self.agent.live);
        if conversation.is_none() && live.is_none() && self.agent.all_offered(record) {
            return Cow::Borrowed(self.agent.specs());
        }
        let mut specs: Vec<ToolSpec> = self.agent.offered(record, live).collect();
        if let Some(conversation) = conversation {
            specs.extend(conversation.offered(record, None));
        }
        Cow::Owned(specs)
    }

    /// Checks a call against both registries: not the reserved name, a known tool, offered to
    /// this thread, arguments valid.
    pub fn check(
        &self,
        name: &str,
        args: &serde_json::Value,
        record: &ThreadRecord,
    ) -> Result<&'a Arc<dyn Tool>, CallRejection> {
        if name == INJECTED_TOOL {
            return Err(CallRejection::Reserved);
        }
        match (self.agent.check(name, args, record), self.conversation) {
            (Err(CallRejection::Unknown(_)), Some(conversation)) => {
                conversation.check(name, args, record)
            }
            (result, _) => result,
        }
    }
}
