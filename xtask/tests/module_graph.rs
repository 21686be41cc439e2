//! xtask's modules form a one-way graph: no module reaches itself through
//! the `crate::…` paths of its code (comments and doc links do not count;
//! each folder of modules, such as `experiments/`, counts as one module;
//! `lib.rs` is the root, and `main.rs` is the binary that calls into it).
//! A cycle makes the layers impossible to read one at a time, so this test
//! names the first one it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `crate::<module>` names used in the code of `text`.
fn modules_used(text: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (i, _) in line.match_indices("crate::") {
            let name: String = line[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

/// Module name → the modules its code uses, for every file of `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |name: String, path: &Path| {
        let text = std::fs::read_to_string(path).unwrap();
        graph.entry(name).or_default().extend(modules_used(&text));
    };
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.is_dir() {
            // a folder of modules (`experiments/`, `spec/`) is one node
            for file in std::fs::read_dir(&path).unwrap() {
                let file = file.unwrap().path();
                if file.extension().is_some_and(|e| e == "rs") {
                    add(stem.to_string(), &file);
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "lib" && stem != "main" {
            add(stem.to_string(), &path);
        }
    }
    let names: BTreeSet<String> = graph.keys().cloned().collect();
    for (name, used) in &mut graph {
        used.retain(|u| u != name && names.contains(u));
    }
    graph
}

/// A cycle through `from`, depth first, if there is one.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    let here = path.last().unwrap().clone();
    for next in &graph[&here] {
        if let Some(i) = path.iter().position(|p| p == next) {
            let mut cycle = path[i..].to_vec();
            cycle.push(next.clone());
            return Some(cycle);
        }
        if done.contains(next) {
            continue;
        }
        path.push(next.clone());
        if let Some(c) = cycle_from(graph, path, done) {
            return Some(c);
        }
        path.pop();
    }
    done.insert(here);
    None
}

#[test]
fn xtask_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(graph.len() > 10, "found only {:?}", graph.keys());
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, &mut vec![start.clone()], &mut done) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

/// The checker finds a cycle where there is one.
#[test]
fn a_cycle_is_found() {
    let mut graph = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")] {
        graph
            .entry(from.to_string())
            .or_insert_with(BTreeSet::new)
            .insert(to.to_string());
    }
    let cycle = cycle_from(&graph, &mut vec!["d".into()], &mut BTreeSet::new()).unwrap();
    assert_eq!(cycle, ["a", "b", "c", "a"]);
    assert_eq!(
        modules_used("use crate::spec::X;\n// crate::runner\nlet y = crate::files::f();"),
        BTreeSet::from(["files".to_string(), "spec".to_string()])
    );
}
