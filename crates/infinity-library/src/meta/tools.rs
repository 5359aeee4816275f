//! The `meta` category (opt-in): `search_tools`, `list_tools` and `execute_tool` over the host's
//! directory ([`crate::meta`]): tool servers (the kind `app`), stored agents, skills and
//! knowledge, used without being listed among the agent's tools.
//!
//! `execute_tool` resolves a name among the tools the thread is offered first (so a name the
//! agent has always means its own tool), then in the directory: of the kind given, or else of
//! each kind in turn (`app`, `agent`, `skill`, `knowledge`), the first that has the name winning.
//! That order is the hazard of leaving `kind` out: a name two kinds share runs the earlier kind's
//! item. A tool server's function runs as a call to the server (dispatched: the thread waits for
//! its result); an agent is delegated to under the `agent` category's depth and fan-out limits;
//! a skill or knowledge entry is loaded (its text is the result).

use serde_json::{json, Value};

use crate::knowledge::Knowledge;
use crate::meta::{Directory, Item, Kind, Miss};
use infinity_agent_core::effect::ServerTarget;
use infinity_agent_core::library::Library;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::internal::delegation::{delegate, delegation_schema};
use infinity_agent_core::tools::{argument_problems, CallRejection};
use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};

use crate::LibraryExt;

/// The name of the search tool (hosts load the directory for agents that have it).
pub const SEARCH_TOOLS: &str = "search_tools";
const LIST_TOOLS: &str = "list_tools";
const EXECUTE_TOOL: &str = "execute_tool";
/// Results per kind a search returns unless it asks for another cap.
const DEFAULT_PER_KIND: u64 = 5;
/// The largest per-kind cap.
const MAX_PER_KIND: u64 = 20;
/// The most names one `list_tools` call takes.
const MAX_NAMES: usize = 20;

fn kind_property() -> Value {
    json!({"type": "string",
           "description": format!("Only items of this kind: one of {}.", Kind::names().join(", "))})
}

/// Reads `kind`, when given.
fn kind_of(args: &Value) -> Result<Option<Kind>, ToolOutcome> {
    match args["kind"].as_str() {
        None => Ok(None),
        Some(k) => k
            .parse()
            .map(Some)
            .map_err(|e| ToolOutcome::error(format!("Error: {e}."))),
    }
}

/// The host's directory (an empty one when it keeps none).
fn directory_of(library: Option<&Library>) -> std::sync::Arc<Directory> {
    library.and_then(Library::directory).unwrap_or_default()
}

/// The item `name` names: of `kind`, or of the first kind that has it.
fn resolve<'a>(
    directory: &'a Directory,
    knowledge: Option<&'a Knowledge>,
    kind: Option<Kind>,
    name: &str,
) -> Result<Item<'a>, String> {
    let kinds: Vec<Kind> = match kind {
        Some(k) => vec![k],
        None => Kind::ALL.to_vec(),
    };
    let mut problem = None;
    for k in &kinds {
        match directory.find(*k, name, knowledge) {
            Ok(item) => return Ok(item),
            Err(Miss::Problem(why)) => {
                problem.get_or_insert(why);
            }
            Err(Miss::Missing) => {}
        }
    }
    Err(problem.unwrap_or_else(|| {
        let tried: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        format!(
            "nothing named `{name}` in the directory (kinds looked in: {}); search_tools finds \
             names",
            tried.join(", ")
        )
    }))
}

#[derive(Debug)]
pub(crate) struct SearchTools;

impl SearchTools {
    fn spec_with(&self, counts: Option<(usize, usize, usize, usize)>) -> ToolSpec {
        let holds = match counts {
            Some((servers, agents, skills, knowledge)) => format!(
                " The directory holds {servers} app{}, {agents} agent{}, {skills} skill{} and \
                 {knowledge} knowledge entr{}.",
                plural(servers),
                plural(agents),
                plural(skills),
                if knowledge == 1 { "y" } else { "ies" }
            ),
            None => String::new(),
        };
        ToolSpec::new(
            SEARCH_TOOLS,
            &format!(
                "Search the directory of things you can use without having them as tools: apps \
                 (tool servers' tools), agents you can delegate to, skills and knowledge. \
                 Returns the best matches per kind, each with its name (namespace/name), source \
                 (its kind) and description; list_tools gives their arguments and \
                 execute_tool runs them.{holds}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1,
                              "description": "Words describing what you need."},
                    "kind": kind_property(),
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PER_KIND,
                              "description": "At most this many results of each kind (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl Tool for SearchTools {
    fn spec(&self) -> ToolSpec {
        self.spec_with(None)
    }

    fn describes_library(&self) -> bool {
        true
    }

    fn spec_in(&self, library: &Library) -> ToolSpec {
        let directory = library.directory().unwrap_or_default();
        let knowledge = library.knowledge();
        let (skills, entries) = knowledge.as_deref().map_or((0, 0), |k| {
            let skills = k.list(Some(crate::knowledge::EntryType::Skill)).len();
            (skills, k.len() - skills)
        });
        self.spec_with(Some((
            directory.tool_servers().len(),
            directory.agents().len(),
            directory.skills().len() + skills,
            entries,
        )))
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let kind = match kind_of(args) {
            Ok(k) => k,
            Err(err) => return err,
        };
        let per_kind = args["limit"]
            .as_u64()
            .unwrap_or(DEFAULT_PER_KIND)
            .min(MAX_PER_KIND);
        let query = args["query"].as_str().unwrap_or_default();
        let library = ctx.library;
        let directory = directory_of(library);
        let knowledge = library.and_then(Library::knowledge);
        let found = directory.search(
            query,
            kind,
            usize::try_from(per_kind).unwrap_or(5),
            knowledge.as_deref(),
        );
        if found.is_empty() {
            return ToolOutcome::ok(format!(
                "Nothing in the directory matches `{query}`{}.",
                kind.map(|k| format!(" among its {k} items"))
                    .unwrap_or_default()
            ));
        }
        ToolOutcome::ok(json!({"results": found}).to_string())
    }
}

#[derive(Debug)]
pub(crate) struct ListTools;

impl Tool for ListTools {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            LIST_TOOLS,
            "Describe directory items (or your own tools) by name before using them: for an app \
             each of its functions with its input schema (the default function under the \
             app's name, the others as name:function), for an agent the arguments a \
             delegation takes, for a skill or knowledge entry its text.",
            json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "minItems": 1, "maxItems": MAX_NAMES,
                              "items": {"type": "string", "minLength": 1},
                              "description": "Names as search_tools gives them."},
                    "kind": kind_property()
                },
                "required": ["names"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let kind = match kind_of(args) {
            Ok(k) => k,
            Err(err) => return err,
        };
        let library = ctx.library;
        let directory = directory_of(library);
        let knowledge = library.and_then(Library::knowledge);
        let offered = ctx.offered.specs_for(&*ctx.record, None);
        let mut tools = Vec::new();
        for name in args["names"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            if let Some(own) = offered.iter().find(|s| s.name == name) {
                tools.push(json!({"name": own.name, "source": "tool",
                                  "description": own.description,
                                  "input_schema": own.input_schema}));
                continue;
            }
            match resolve(&directory, knowledge.as_deref(), kind, name) {
                Ok(item) => tools.extend(describe(&item, name)),
                Err(why) => tools.push(json!({"name": name, "error": why})),
            }
        }
        ToolOutcome::ok(json!({"tools": tools}).to_string())
    }
}

/// `list_tools` entries for an item found by `asked`.
fn describe(item: &Item<'_>, asked: &str) -> Vec<Value> {
    match item {
        Item::ToolServer { server, function } => {
            // The server's name lists every function; `server:function` only that one.
            let which: Vec<usize> = if asked
                .ends_with(&format!(":{}", server.functions[*function].name))
                && *function > 0
            {
                vec![*function]
            } else {
                (0..server.functions.len()).collect()
            };
            which
                .into_iter()
                .map(|i| {
                    let f = &server.functions[i];
                    json!({"name": server.function_reference(i), "source": Kind::ToolServer,
                           "function": f.name, "default": i == 0,
                           "description": f.description, "input_schema": f.input_schema})
                })
                .collect()
        }
        Item::Agent(agent) => vec![json!({
            "name": item.reference(), "source": Kind::Agent, "version": agent.version,
            "description": agent.description, "input_schema": delegation_schema()
        })],
        Item::Skill(skill) => vec![json!({
            "name": item.reference(), "source": Kind::Skill,
            "description": skill.description, "content": skill.content
        })],
        Item::Entry(entry) => vec![json!({
            "name": item.reference(), "source": item.kind(), "type": entry.entry_type,
            "description": entry.description, "content": entry.content, "tags": entry.tags
        })],
    }
}

#[derive(Debug)]
pub(crate) struct ExecuteTool;

impl Tool for ExecuteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            EXECUTE_TOOL,
            "Run something by name: one of your own tools, or a directory item (an app's \
             function runs on its server and its result comes back like any tool's; an agent \
             gets the task in `arguments` (task, context, images) and its result comes back; \
             a skill or knowledge entry is loaded). Without `kind` your own tools are tried \
             first, then apps, agents, skills and knowledge, and the first with the name \
             runs: give `kind` when a name could mean two things.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1,
                             "description": "A name as search_tools or list_tools gives it."},
                    "kind": kind_property(),
                    "arguments": {"type": "object",
                                  "description": "The arguments, as list_tools describes them."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let kind = match kind_of(args) {
            Ok(k) => k,
            Err(err) => return err,
        };
        let name = args["name"].as_str().unwrap_or_default();
        let arguments = match &args["arguments"] {
            Value::Null => json!({}),
            other => other.clone(),
        };
        if [SEARCH_TOOLS, LIST_TOOLS, EXECUTE_TOOL].contains(&name) {
            return ToolOutcome::error(format!(
                "Error: call `{name}` directly, not through execute_tool."
            ));
        }
        let offered = ctx.offered;
        match offered.check(name, &arguments, ctx.record) {
            Ok(tool) => return tool.call(&arguments, ctx),
            Err(CallRejection::Unknown(_)) => {}
            Err(rejection) => return ToolOutcome::error(rejection.message(name, &[])),
        }
        let library = ctx.library;
        let directory = directory_of(library);
        let knowledge = library.and_then(Library::knowledge);
        let item = match resolve(&directory, knowledge.as_deref(), kind, name) {
            Ok(item) => item,
            Err(why) => return ToolOutcome::error(format!("Error: {why}.")),
        };
        match item {
            Item::ToolServer { server, function } => {
                let spec = &server.functions[function];
                if let Some(why) = check(&spec.input_schema, &arguments) {
                    return ToolOutcome::error(format!(
                        "Error: invalid arguments for `{}`: {why}",
                        server.function_reference(function)
                    ));
                }
                let target = ServerTarget {
                    base_url: server.base_url.clone(),
                    endpoint: server.endpoint.clone(),
                };
                let function = spec.name.clone();
                drop(knowledge);
                ctx.dispatch(target, &function, arguments);
                ToolOutcome::Dispatched
            }
            Item::Agent(agent) => {
                if let Some(why) = check(&delegation_schema(), &arguments) {
                    return ToolOutcome::error(format!(
                        "Error: invalid arguments for the agent `{}`: {why}",
                        agent.name
                    ));
                }
                let agent = agent.name.clone();
                drop(knowledge);
                delegate(&agent, &arguments, ctx)
            }
            Item::Skill(skill) => {
                ToolOutcome::ok(format!("Skill {}:\n\n{}", item.reference(), skill.content))
            }
            Item::Entry(entry) => ToolOutcome::ok(format!(
                "{} {}:\n\n{}",
                entry.entry_type,
                item.reference(),
                entry.content
            )),
        }
    }
}

/// What is wrong with `args` by `schema`, if anything.
fn check(schema: &Value, args: &Value) -> Option<String> {
    match jsonschema::validator_for(schema) {
        Ok(validator) => argument_problems(&validator, args, schema),
        Err(e) => Some(format!("its input schema does not compile ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::meta::DIRECTORY_REFRESH;
    use crate::meta::{DirectoryAgent, DirectoryContents, DirectorySource, DirectoryToolServer};
    use infinity_agent_core::ids::ThreadId;
    use infinity_agent_core::state::ThreadRecord;
    use infinity_agent_core::tools::internal::InternalTools;
    use infinity_agent_core::tools::{OfferedTools, ToolRegistry};

    #[derive(Debug)]
    struct Fixed;

    #[async_trait]
    impl DirectorySource for Fixed {
        async fn load(
            &self,
        ) -> Result<DirectoryContents, infinity_agent_core::library::ShelfError> {
            let server = |url: &str| {
                let tool = ToolSpec::new("t", "A tool.", json!({"type": "object"}));
                DirectoryToolServer::new(
                    url,
                    Some("Tools"),
                    None,
                    format!("{url}/invoke"),
                    vec![tool],
                )
            };
            Ok(DirectoryContents {
                tool_servers: vec![server("http://a.test"), server("http://b.test")],
                agents: vec![DirectoryAgent {
                    name: "scout".to_owned(),
                    version: 3,
                    description: String::new(),
                }],
                skills: Vec::new(),
            })
        }
    }

    #[tokio::test]
    async fn the_model_is_told_how_many_tool_servers_the_directory_holds() {
        let library = Library::new().with_directory(Arc::new(Fixed), DIRECTORY_REFRESH);
        let registry = ToolRegistry::for_agent(
            &crate::categories(),
            &InternalTools::builder()
                .flag(crate::meta::CATEGORY, true)
                .build(),
            &Default::default(),
            &[],
        )
        .unwrap();
        let record = ThreadRecord::new(
            ThreadId::new("t").unwrap(),
            "a".to_owned(),
            None,
            jiff::Timestamp::UNIX_EPOCH,
        );
        let offered = OfferedTools::new(&registry, None);
        let described = |library: Option<&Library>| {
            offered
                .specs_for(&record, library)
                .iter()
                .find(|s| s.name == SEARCH_TOOLS)
                .map(|s| s.description.clone())
                .unwrap()
        };
        // Before the host loaded it, and without a library, the count is not claimed.
        assert!(!described(Some(&library)).contains("The directory holds 2"));
        assert!(library.prepare_for(|c| c == "meta").await.is_empty());
        assert!(
            described(Some(&library))
                .contains("The directory holds 2 apps, 1 agent, 0 skills and 0 knowledge entries."),
            "{}",
            described(Some(&library))
        );
        assert!(!described(None).contains("The directory holds"));
        // The meta tools come next to the agent's own, which stay.
        let names: Vec<String> = offered
            .specs_for(&record, Some(&library))
            .iter()
            .map(|s| s.name.clone())
            .collect();
        for name in [
            "plan_create",
            "memory_set",
            SEARCH_TOOLS,
            LIST_TOOLS,
            EXECUTE_TOOL,
        ] {
            assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
        }
    }

    #[test]
    fn references_name_one_item_or_say_why_not() {
        let spec = |n: &str| ToolSpec::new(n, "d", json!({"type": "object"}));
        let directory = Directory::new(DirectoryContents {
            tool_servers: vec![
                DirectoryToolServer::new(
                    "http://127.0.0.1:4100/x",
                    Some("Clock"),
                    None,
                    "e".into(),
                    vec![spec("now"), spec("zones")],
                ),
                DirectoryToolServer::new(
                    "http://127.0.0.1:4100/y",
                    Some("Clock"),
                    None,
                    "e".into(),
                    vec![spec("now")],
                ),
            ],
            agents: Vec::new(),
            skills: Vec::new(),
        });
        // Two servers on one host with one toolset name are told apart.
        let refs: Vec<String> = directory
            .tool_servers()
            .iter()
            .map(DirectoryToolServer::reference)
            .collect();
        assert_eq!(refs, ["127.0.0.1:4100/clock", "127.0.0.1:4100/clock-2"]);
        let found = directory
            .find(Kind::ToolServer, "127.0.0.1:4100/clock:zones", None)
            .unwrap();
        assert_eq!(found.reference(), "127.0.0.1:4100/clock:zones");
        let found = directory
            .find(Kind::ToolServer, "127.0.0.1:4100/clock", None)
            .unwrap();
        assert!(matches!(found, Item::ToolServer { function: 0, .. }));
        assert!(matches!(
            directory.find(Kind::ToolServer, "127.0.0.1:4100/clock:moon", None),
            Err(Miss::Problem(why)) if why.contains("has no function `moon`; its functions are now, zones")
        ));
        assert!(matches!(
            directory.find(Kind::ToolServer, "clock-2", None),
            Ok(Item::ToolServer { .. })
        ));
        assert_eq!(
            directory.find(Kind::ToolServer, "sundial", None),
            Err(Miss::Missing)
        );
        let err = "flow".parse::<Kind>().unwrap_err();
        assert!(
            err.contains("the kinds are app, agent, skill, knowledge"),
            "{err}"
        );
    }
}
