//! Documents that cannot drift from the code they describe: the layer tables of
//! docs/architecture.md say what the layering test holds (`layers.rs`), a module whose docs
//! list its files ("a file each:") names every one, and the list of compatibility shims names
//! only shims the code still has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use infinity_test_support::repo;

use crate::layers::{CRATE_LAYERS, LAYERS};

/// The rows of the first Markdown table under the heading `heading` of `text`, each a list of
/// its cells.
fn table_under(text: &str, heading: &str) -> Vec<Vec<String>> {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no heading `{heading}`"));
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|row| {
            row.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The module names a table cell gives in backticks (`state/` is `state`).
fn modules(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|name| name.trim_end_matches('/').to_owned())
        .collect()
}

#[test]
fn the_architecture_docs_layer_tables_say_what_the_layering_test_holds() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();

    // The core's: a row may group several of the test's layers, bottom first.
    let rows: Vec<Vec<String>> = table_under(&doc, "## The core's layers")
        .iter()
        .map(|row| modules(&row[1]))
        .collect();
    let layer = |module: &str| LAYERS.iter().position(|l| l.contains(&module));
    let documented: BTreeSet<&str> = rows.iter().flatten().map(String::as_str).collect();
    let tested: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    assert_eq!(
        documented, tested,
        "the core's modules in docs/architecture.md and in tests/layers.rs"
    );
    for pair in rows.windows(2) {
        let below = pair[0].iter().filter_map(|m| layer(m)).max();
        let above = pair[1].iter().filter_map(|m| layer(m)).min();
        assert!(
            below < above,
            "docs/architecture.md puts {:?} below {:?}; tests/layers.rs does not",
            pair[0],
            pair[1]
        );
    }

    // The other crates': the same layers, in the same order.
    let documented: BTreeMap<String, Vec<BTreeSet<String>>> =
        table_under(&doc, "## The other crates' layers")
            .iter()
            .map(|row| {
                let name = row[0].trim_matches('`').to_owned();
                let layers = row[1]
                    .split('<')
                    .map(|layer| modules(layer).into_iter().collect())
                    .collect();
                (name, layers)
            })
            .collect();
    let tested: BTreeMap<String, Vec<BTreeSet<String>>> = CRATE_LAYERS
        .iter()
        .map(|(name, layers)| {
            let layers = layers
                .iter()
                .map(|l| l.iter().map(|m| (*m).to_owned()).collect())
                .collect();
            ((*name).to_owned(), layers)
        })
        .collect();
    for (name, layers) in &tested {
        assert_eq!(
            documented.get(name),
            Some(layers),
            "{name}'s layers in docs/architecture.md and in tests/layers.rs"
        );
    }
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        tested.keys().collect::<Vec<_>>(),
        "the crates in docs/architecture.md's table and in tests/layers.rs"
    );
}

/// The Rust files and folders of the workspace's crates' `src`, recursively.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The folder holding a module's own files: `x/` for `x.rs`, its own for `mod.rs` or `lib.rs`.
fn folder_of(file: &Path) -> PathBuf {
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => file.parent().unwrap().to_owned(),
        _ => file.with_extension(""),
    }
}

#[test]
fn a_modules_list_of_its_files_names_every_one() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(repo().join("crates")).unwrap().flatten() {
        let src = krate.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    let mut listing = Vec::new();
    let mut missing = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        if !docs.contains("a file each:") {
            continue;
        }
        listing.push(file.clone());
        let folder = folder_of(&file);
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path == file || name == "mod" {
                continue;
            }
            if !docs.contains(&format!("`{name}`")) {
                missing.push(format!("{} leaves out `{name}`", file.display()));
            }
        }
    }
    assert!(
        listing
            .iter()
            .any(|f| f.ends_with("infinity-agent-core/src/engine/mod.rs")),
        "the engine's docs list its files: {listing:?}"
    );
    assert!(missing.is_empty(), "{missing:#?}");
}

#[test]
fn every_compatibility_shim_listed_is_still_in_the_code() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let rows = table_under(&doc, "## Compatibility shims");
    assert!(rows.len() >= 5, "{rows:?}");
    let mut code = String::new();
    let mut files = Vec::new();
    for krate in ["infinity-agent-core", "infinity-server"] {
        sources(&repo().join("crates").join(krate).join("src"), &mut files);
    }
    for file in files {
        code.push_str(&std::fs::read_to_string(file).unwrap());
    }
    for row in &rows {
        // The shim's name: its first backticked word, less a type's path or a route's method.
        let named = modules(&row[0]);
        let name = named.first().expect("a shim in backticks");
        let name = name.rsplit("::").next().unwrap_or(name);
        let name = name.trim_start_matches("GET ");
        assert!(
            code.contains(name),
            "docs/architecture.md lists the shim `{name}`, which the code no longer has: take it off the list"
        );
    }
}
