//! The core's modules are layered (docs/architecture.md): a module never imports one above it,
//! so no two import each other. This reads the sources (comments and test modules left out) and
//! checks it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules, bottom first.
pub(crate) const LAYERS: &[&[&str]] = &[
    &["ids", "json", "schema", "text", "cost", "telemetry"],
    &["history"],
    &["model"],
    &["state"],
    &["input"],
    &["effect"],
    &["commit"],
    &["library"],
    &["tools"],
    &["scripted"],
    &["agent"],
    &["catalog"],
    &["engine"],
    &["store"],
    &["host", "migration"],
    &["runtime", "testing"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The `crate::X` modules each top-level module's code refers to (comments and test modules
/// left out), for the crate whose sources are in `src`: `known` tells a module from an item of
/// the crate's root.
fn imports_in(src: &Path, known: impl Fn(&str) -> bool) -> BTreeMap<String, BTreeSet<String>> {
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in rust_files(src) {
        let relative = path.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap();
        let module = first.as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" || module == "main" || module == "bin" {
            continue;
        }
        found.entry(module.to_owned()).or_default();
        let code = code_of(&path);
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            // `crate::x::...`, or each name of a group, `crate::{x, y::z}`.
            let group = rest
                .strip_prefix('{')
                .and_then(|g| g.split_once('}'))
                .map_or(rest, |(inside, _)| inside);
            for part in group.split(',') {
                let name: String = part
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != module && known(&name) {
                    found.entry(module.to_owned()).or_default().insert(name);
                }
                if !rest.starts_with('{') {
                    break;
                }
            }
        }
    }
    found
}

/// A source file's code: its comment lines and its items under `#[cfg(test)]` left out (an
/// inline test module, or one declared with `mod tests;`), wherever they are in the file.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let code = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    without_test_items(&code)
}

/// `code` without the items `#[cfg(test)]` marks: each ends at its first `;` when that comes
/// before any `{`, else at the `}` that closes its first `{`.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => semi + 1,
            (Some(semi), None) => semi + 1,
            (_, Some(brace)) => closing(item, brace).map_or(item.len(), |close| close + 1),
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the `}` that closes the `{` at `open` is.
fn closing(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn test_items_are_left_out_wherever_they_are() {
    let code = "mod a;\n#[cfg(test)]\nmod tests;\nuse crate::b;\n#[cfg(test)]\nmod more {\n    use crate::c;\n    fn f() { if x { } }\n}\nuse crate::d;";
    let kept = without_test_items(code);
    assert!(
        kept.contains("use crate::b;") && kept.contains("use crate::d;"),
        "{kept}"
    );
    assert!(
        !kept.contains("crate::c") && !kept.contains("mod tests"),
        "{kept}"
    );
}

/// The Rust files below `dir`, but test modules in files of their own (`engine/tests.rs`, which
/// may use the test utilities).
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some("rs")
                && path.file_name().and_then(|n| n.to_str()) != Some("tests.rs")
            {
                files.push(path);
            }
        }
    }
    files
}

/// The core's imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    imports_in(&src, |name| layer_of(name).is_some())
}

/// The imports that go up a layer, as `from -> to`, in the crate at `crates/NAME` with
/// `layers` (bottom first); a module in no layer is one too (`module -> ?`).
fn upward_imports(name: &str, layers: &[&[&str]]) -> Vec<String> {
    let layer = |m: &str| layers.iter().position(|l| l.contains(&m));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src");
    let modules: BTreeSet<String> = imports_in(&src, |_| true).into_keys().collect();
    let imports = imports_in(&src, |m| modules.contains(m));
    let mut wrong = Vec::new();
    for (module, uses) in &imports {
        let Some(own) = layer(module) else {
            wrong.push(format!("{module} -> ? (in no layer)"));
            continue;
        };
        for used in uses {
            if layer(used).is_some_and(|l| l > own) {
                wrong.push(format!("{module} -> {used}"));
            }
        }
    }
    wrong
}

/// The other crates' top-level modules, bottom first: as in the core, a module imports only
/// the layers below its own and its own, so no two import each other.
pub(crate) const CRATE_LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "infinity-aws",
        &[
            &["item", "wire", "artifacts", "testing"],
            &["store"],
            &["config", "catalog", "knowledge", "dlq"],
            &["queue"],
            &["remotes", "migration"],
            &["handler"],
            &["tool_servers", "front", "local"],
            &["lambda"],
        ],
    ),
    (
        "infinity-models",
        &[
            &["json", "names", "sse", "model_info", "sigv4", "turns"],
            &["convert", "transport"],
            &["fetch", "anthropic", "openai", "bedrock"],
            &["stored"],
        ],
    ),
    ("infinity-rap", &[&["wire", "signing"], &["kit"]]),
    (
        "infinity-library",
        &[&["search"], &["knowledge", "artifact", "remote"], &["meta"]],
    ),
    (
        "infinity-rap-runtime",
        &[&["client", "receiver"], &["migration"]],
    ),
    (
        "infinity-mcp-bridge",
        &[
            &["error", "results", "source", "tools", "test_server"],
            &["bridge"],
            &["cli"],
        ],
    ),
    (
        "infinity-server",
        &[
            &["api"],
            &["guard", "connections"],
            &[
                "artifacts",
                "events",
                "markdown",
                "web",
                "remotes",
                "migration",
            ],
            &["openapi"],
            &["stack", "testing"],
        ],
    ),
    ("infinity-test-support", &[&["http", "tools"]]),
    (
        "infinity-cli",
        &[
            &["display"],
            &["render"],
            &["activity", "aws"],
            &["dlq", "lists"],
            &["place", "people"],
            &["agents", "knowledge", "tool_servers", "migrate", "remote"],
            &["system"],
            &["commands"],
        ],
    ),
];

#[test]
fn the_other_crates_modules_are_layered_too() {
    for (name, layers) in CRATE_LAYERS {
        let wrong = upward_imports(name, layers);
        assert!(
            wrong.is_empty(),
            "{name}: imports that go up a layer or modules in none: {wrong:?}"
        );
    }
    // The check sees a wrong import: with `queue` put below `store`, the queue's use of the
    // store goes up.
    let turned: Vec<&[&str]> = vec![&["queue"], &["store"]];
    let wrong = upward_imports("infinity-aws", &turned);
    assert!(wrong.contains(&"queue -> store".to_owned()), "{wrong:?}");
    // It reads grouped imports too: the CLI's `use crate::{agents, knowledge, ...}`.
    let turned: Vec<&[&str]> = vec![&["system"], &["agents", "knowledge", "tool_servers"]];
    let wrong = upward_imports("infinity-cli", &turned);
    for used in ["agents", "knowledge", "tool_servers"] {
        assert!(wrong.contains(&format!("system -> {used}")), "{wrong:?}");
    }
}

#[test]
fn every_module_is_in_a_layer() {
    for module in imports().keys() {
        assert!(
            layer_of(module).is_some(),
            "module `{module}` is in no layer: add it to LAYERS (and docs/architecture.md)"
        );
    }
}

#[test]
fn no_module_imports_one_above_it() {
    let imports = imports();
    assert!(
        imports.contains_key("engine") && imports.contains_key("host"),
        "{imports:?}"
    );
    // The whole file is read: `engine/mod.rs` imports after `#[cfg(test)] mod tests;`.
    let engine = code_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine/mod.rs"));
    assert!(engine.contains("use crate::commit::Commit;"), "{engine}");
    let mut upward = Vec::new();
    for (module, uses) in &imports {
        let Some(own) = layer_of(module) else {
            continue;
        };
        for used in uses {
            if layer_of(used).is_some_and(|l| l > own) {
                upward.push(format!("{module} -> {used}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that go up a layer: {upward:?}");
}

#[test]
fn the_data_layer_knows_nothing_of_tools_or_the_engine() {
    let imports = imports();
    for data in [
        "ids", "history", "model", "state", "input", "effect", "commit",
    ] {
        for above in [
            "tools", "engine", "agent", "host", "store", "runtime", "scripted",
        ] {
            assert!(
                !imports.get(data).is_some_and(|u| u.contains(above)),
                "`{data}` imports `{above}`"
            );
        }
    }
}

/// The crates' own dependencies on each other, as docs/architecture.md ("Crates") draws them:
/// the protocol crate and the tool servers built on it never pull in the runtime.
const CRATES: &[(&str, &[&str])] = &[
    ("infinity-retry", &[]),
    ("infinity-agent-core", &["infinity-retry"]),
    ("infinity-rap", &["infinity-retry"]),
    (
        "infinity-models",
        &["infinity-agent-core", "infinity-retry"],
    ),
    (
        "infinity-rap-runtime",
        &["infinity-agent-core", "infinity-rap", "infinity-retry"],
    ),
    ("infinity-mcp-bridge", &["infinity-rap"]),
    ("infinity-library", &["infinity-agent-core"]),
    (
        "infinity-aws",
        &[
            "infinity-agent-core",
            "infinity-library",
            "infinity-models",
            "infinity-rap",
            "infinity-rap-runtime",
        ],
    ),
    (
        "infinity-server",
        &[
            "infinity-agent-core",
            "infinity-aws",
            "infinity-library",
            "infinity-rap",
            "infinity-rap-runtime",
        ],
    ),
    (
        "infinity-cli",
        &[
            "infinity-agent-core",
            "infinity-aws",
            "infinity-library",
            "infinity-mcp-bridge",
            "infinity-models",
            "infinity-rap",
            "infinity-rap-runtime",
            "infinity-server",
        ],
    ),
    // What the tests share; every crate's tests may use it (a dev-dependency only).
    ("infinity-test-support", &[]),
];

/// The `infinity-*` crates named in the `[dependencies]` table of a crate's manifest.
fn crate_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_dependencies = false;
    let mut found = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && line.starts_with("infinity-") {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            found.insert(name.to_owned());
        }
    }
    found
}

#[test]
fn no_crate_depends_on_one_it_should_not() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Every crate has its line: a new one is placed in the map before it can be checked.
    for entry in std::fs::read_dir(&crates).unwrap() {
        let name = entry.unwrap().file_name().to_str().unwrap().to_owned();
        assert!(
            CRATES.iter().any(|(c, _)| *c == name),
            "crates/{name} is not in CRATES (and docs/architecture.md, \"Crates\")"
        );
    }
    for (name, allowed) in CRATES {
        let manifest = std::fs::read_to_string(crates.join(name).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{name}/Cargo.toml: {e}"));
        let extra: Vec<String> = crate_dependencies(&manifest)
            .into_iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(extra.is_empty(), "{name} depends on {extra:?}");
    }
}

#[test]
fn the_manifest_reader_sees_dependencies_and_nothing_else() {
    let manifest = "[package]\nname = \"infinity-x\"\n[dependencies]\ninfinity-agent-core.workspace = true\ninfinity-rap = { workspace = true }\nserde = \"1\"\n[dev-dependencies]\ninfinity-models.workspace = true\n";
    assert_eq!(
        crate_dependencies(manifest),
        BTreeSet::from(["infinity-agent-core".to_owned(), "infinity-rap".to_owned()])
    );
}

/// The integration-test binaries cargo would make of a crate's `tests/` folder, and the modules
/// the crate's `tests/main.rs` declares (empty without one).
fn test_targets(tests: &Path) -> (Vec<String>, BTreeSet<String>) {
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() && (path.join("main.rs").exists() || path.join("mod.rs").exists()) {
            targets.push(name);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            targets.push(stem.to_owned());
        }
    }
    targets.sort();
    let declared = std::fs::read_to_string(tests.join("main.rs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    (targets, declared)
}

/// Each test binary links the crate graph again (#31): a crate has one, `tests/main.rs`, and
/// every file beside it is one of its modules, so a new file is never left uncompiled.
#[test]
fn every_crate_has_one_test_binary_holding_all_its_test_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for group in ["crates", "examples"] {
        for entry in std::fs::read_dir(root.join(group)).unwrap() {
            let krate = entry.unwrap().path();
            let tests = krate.join("tests");
            if !tests.is_dir() {
                continue;
            }
            checked += 1;
            let (targets, declared) = test_targets(&tests);
            if !targets.iter().any(|t| t == "main") {
                // Autodiscovered: one file or one folder with a main.rs makes one binary.
                assert!(targets.len() <= 1, "{}: {targets:?}", krate.display());
                continue;
            }
            let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
            assert!(
                manifest.contains("autotests = false"),
                "{}: tests/main.rs without `autotests = false`",
                krate.display()
            );
            let missing: Vec<&String> = targets
                .iter()
                .filter(|t| *t != "main" && !declared.contains(*t))
                .collect();
            assert!(
                missing.is_empty(),
                "{}/tests/main.rs does not declare {missing:?}: they would never be compiled",
                krate.display()
            );
            assert!(
                !tests
                    .read_dir()
                    .unwrap()
                    .any(|e| e.unwrap().path().join("main.rs").exists()),
                "{}: a tests/<folder>/main.rs beside tests/main.rs",
                krate.display()
            );
        }
    }
    assert!(checked >= 8, "only {checked} crates with tests found");
}

/// The parts of `tools/` (a file or folder two levels deep at most: `registry`, `builtin/threads`,
/// `internal/plan`, ...) with the parts each refers to (comments and test modules left out). A
/// part's use of an enclosing module (`tools`, `internal`: where the shared types are declared)
/// is not counted.
fn tools_graph() -> BTreeMap<String, BTreeSet<String>> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools");
    let files = rust_files(&tools);
    // `internal/plan.rs` -> `internal/plan`, `internal/mod.rs` -> `internal`, `builtin/schedule/x.rs`
    // -> `builtin/schedule`; the top `mod.rs` is `""`.
    let part = |path: &Path| -> String {
        let relative = path.strip_prefix(&tools).unwrap().with_extension("");
        let names: Vec<&str> = relative
            .components()
            .map(|c| c.as_os_str().to_str().unwrap())
            .filter(|n| *n != "mod")
            .take(2)
            .collect();
        names.join("/")
    };
    let parts: BTreeSet<String> = files.iter().map(|f| part(f)).collect();
    let resolve = |names: &[&str]| -> Option<String> {
        let two = names.iter().take(2).copied().collect::<Vec<_>>().join("/");
        if parts.contains(&two) {
            return Some(two);
        }
        parts.contains(names[0]).then(|| names[0].to_owned())
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = part(file);
        let is_mod = file.file_name().and_then(|n| n.to_str()) == Some("mod.rs");
        // The module `super::` names from this file: its folder (a `mod.rs`: the folder's).
        let folder = file.parent().unwrap().strip_prefix(&tools).unwrap();
        let mut parent: Vec<&str> = folder
            .components()
            .map(|c| c.as_os_str().to_str().unwrap())
            .collect();
        if is_mod {
            parent.pop();
        }
        let code = code_of(file);
        let mut refer = |path: Vec<&str>| {
            if path.is_empty() {
                return;
            }
            if let Some(to) = resolve(&path) {
                let enclosing = from == to || from.starts_with(&format!("{to}/")) || to.is_empty();
                if !enclosing {
                    graph.entry(from.clone()).or_default().insert(to);
                }
            }
        };
        let words = |rest: &str| -> Vec<Vec<String>> {
            // `a::b::...`, or each of a group `{a::b, c}`.
            let group = rest
                .strip_prefix('{')
                .and_then(|g| g.split_once('}'))
                .map(|(inside, _)| inside.split(',').map(str::trim).collect::<Vec<_>>())
                .unwrap_or_else(|| vec![rest]);
            group
                .iter()
                .map(|item| {
                    item.split("::")
                        .map(|w| {
                            w.chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect::<String>()
                        })
                        .take_while(|w| !w.is_empty())
                        .take(2)
                        .collect()
                })
                .collect()
        };
        for (i, _) in code.match_indices("crate::tools::") {
            for path in words(&code[i + "crate::tools::".len()..]) {
                refer(path.iter().map(String::as_str).collect());
            }
        }
        for (i, _) in code.match_indices("super::") {
            if i >= 2 && &code[i - 2..i] == "::" {
                continue;
            }
            for path in words(&code[i + "super::".len()..]) {
                let mut full = parent.clone();
                full.extend(path.iter().map(String::as_str));
                refer(full);
            }
        }
        // A `mod.rs` names its children bare: `finish::MAX_RESULT_BYTES`.
        if is_mod {
            for child in parts.iter().filter(|p| {
                p.strip_prefix(&format!("{from}/"))
                    .or(if from.is_empty() {
                        Some(p.as_str())
                    } else {
                        None
                    })
                    .is_some_and(|rest| !rest.contains('/') && !rest.is_empty())
            }) {
                let name = child.rsplit('/').next().unwrap_or_default();
                let bare = code.match_indices(&format!("{name}::")).any(|(i, _)| {
                    let before = code[..i].chars().next_back().unwrap_or(' ');
                    !(before.is_ascii_alphanumeric() || before == '_' || before == ':')
                });
                if bare {
                    graph.entry(from.clone()).or_default().insert(child.clone());
                }
            }
        }
    }
    graph
}

/// A circle in `graph` (as `a -> b -> a`), if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut shown = path[start..].to_vec();
            shown.push(node.to_owned());
            return Some(shown.join(" -> "));
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The parts of `tools/` import each other in one direction only (#31): the registry and the
/// categories never need each other both ways.
#[test]
fn the_parts_of_tools_form_no_circle() {
    let graph = tools_graph();
    assert!(
        graph.contains_key("internal") && graph.contains_key("builtin/threads"),
        "{graph:?}"
    );
    assert_eq!(circle(&graph), None, "{graph:#?}");
    // The check sees one: a registry that used `builtin/threads` while it uses the registry.
    let mut turned = graph.clone();
    turned
        .entry("registry".to_owned())
        .or_default()
        .insert("internal/plan".to_owned());
    turned
        .entry("internal/plan".to_owned())
        .or_default()
        .insert("registry".to_owned());
    assert!(circle(&turned).is_some());
}
