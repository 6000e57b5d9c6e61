//! The workspace's layering, read from its sources: within each crate, the modules directly
//! under its root import each other without a circle, so each one can be read knowing only those
//! below it. (Crates cannot import each other in a circle: Cargo refuses.)
//!
//! A module's imports are the `crate::…` and `super::…` paths of its files, parsed with `syn`
//! (comments and strings are not paths), outside `#[cfg(test)]` items and `tests.rs` files: a
//! test may use whatever it tests with. A name the crate root re-exports (`crate::Gateway`)
//! counts as an import of the module it comes from.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use syn::visit::Visit;

/// The crates of the workspace, each as its source folder.
fn crates() -> Vec<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates: Vec<PathBuf> = fs::read_dir(&workspace)
        .expect("crates/ is readable")
        .map(|entry| entry.expect("an entry of crates/").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    crates.sort();
    crates
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source folder is readable") {
        let path = entry.expect("a source entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The module path of a file under `src`: `grpc/service.rs` is `["grpc", "service"]`,
/// `grpc/mod.rs` is `["grpc"]`, `lib.rs` is `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("the file is under src");
    let mut path: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    path
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The root-level names a file's paths reach: `crate::a::b` and `super::a` (from the root's
/// children) reach `a`; a `use crate::{a, b::c}` reaches `a` and `b`.
struct Reached<'m> {
    module: &'m [String],
    names: BTreeSet<String>,
}

impl Reached<'_> {
    /// The first root-level name of a path given as its segments, when it leaves the module.
    fn path(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let below_root = if first == "crate" {
            Some(&segments[1..])
        } else if first == "super" {
            let climbs = segments.iter().take_while(|s| *s == "super").count();
            (climbs >= self.module.len()).then(|| &segments[climbs..])
        } else {
            None
        };
        if let Some(name) = below_root.and_then(|rest| rest.first()) {
            self.names.insert(name.clone());
        }
    }

    fn tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.path(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.path(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.path(prefix),
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Reached<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// A crate's modules under its root, each with the others it imports.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|name| src.join(name))
        .find(|path| path.exists());
    // What the root re-exports, by the module it comes from: `pub use app::Gateway`.
    let mut owner = BTreeMap::<String, String>::new();
    if let Some(root) = &root {
        let parsed = syn::parse_file(&fs::read_to_string(root).expect("the root is readable"))
            .expect("the root parses");
        for item in parsed.items {
            if let syn::Item::Use(item) = item {
                collect_leaves(&item.tree, &mut Vec::new(), &mut |path| {
                    if let [module, .., name] = path {
                        owner.insert(name.clone(), module.clone());
                    }
                });
            }
        }
    }
    let mut graph = BTreeMap::<String, BTreeSet<String>>::new();
    for file in files {
        let module = module_of(src, &file);
        let Some(top) = module.first().cloned() else {
            continue; // the root itself
        };
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = fs::read_to_string(&file).expect("a source file is readable");
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut reached = Reached {
            module: &module,
            names: BTreeSet::new(),
        };
        reached.visit_file(&parsed);
        let imports = graph.entry(top.clone()).or_default();
        for name in reached.names {
            let target = owner.get(&name).cloned().unwrap_or(name);
            if target != top {
                imports.insert(target);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for imports in graph.values_mut() {
        // Names that are not modules are items of the root itself (a macro, a type).
        imports.retain(|name| modules.contains(name));
    }
    graph
}

fn collect_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, leaf: &mut impl FnMut(&[String])) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            collect_leaves(&path.tree, prefix, leaf);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            prefix.push(name.ident.to_string());
            leaf(prefix);
            prefix.pop();
        }
        syn::UseTree::Rename(rename) => {
            prefix.push(rename.rename.to_string());
            leaf(prefix);
            prefix.pop();
        }
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(group) => {
            for item in &group.items {
                collect_leaves(item, prefix, leaf);
            }
        }
    }
}

/// The circles of `graph` (its strongly connected components of more than one module), by
/// Tarjan's algorithm.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in &self.graph[node] {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

/// The modules still in the one circle left, in the gateway, which is being split into crates
/// of their own: none may join it, and one that leaves it must leave this list.
const STILL_IN_A_CIRCLE: &[(&str, &[&str])] = &[(
    "undolog-gateway",
    &[
        "app",
        "auth",
        "calls",
        "compensate",
        "engine_link",
        "error",
        "grpc",
        "http",
        "interceptors",
        "mcp",
        "metrics",
        "policy",
        "results",
        "runs",
        "sign_in",
        "tasks",
    ],
)];

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_circle() {
    let mut report = Vec::new();
    for src in crates() {
        let graph = graph(&src);
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let known: &[&str] = STILL_IN_A_CIRCLE
            .iter()
            .find(|(krate, _)| *krate == name)
            .map_or(&[], |(_, modules)| modules);
        let found = circles(&graph);
        let circling: BTreeSet<&str> = found.iter().flatten().map(String::as_str).collect();
        let left: Vec<&&str> = known.iter().filter(|m| !circling.contains(**m)).collect();
        if !left.is_empty() {
            report.push(format!(
                "{name}: {left:?} no longer import each other in a circle: take them off STILL_IN_A_CIRCLE"
            ));
        }
        for circle in found {
            if known.len() > 1 && circle.iter().all(|m| known.contains(&m.as_str())) {
                continue;
            }
            let edges: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| circle.contains(to))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            report.push(format!(
                "{name}: {} import each other ({})",
                circle.join(", "),
                edges.join(", ")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "modules in a circle; move what both need below both, or pass it in:\n{}",
        report.join("\n")
    );
}

/// The check itself: a circle is found, and a chain is not one.
#[test]
fn a_circle_of_modules_is_found_and_a_chain_is_not() {
    let graph_of = |edges: &[(&str, &str)]| {
        let mut graph = BTreeMap::<String, BTreeSet<String>>::new();
        for (from, to) in edges {
            graph
                .entry((*from).into())
                .or_default()
                .insert((*to).into());
            graph.entry((*to).into()).or_default();
        }
        graph
    };
    type Edges = &'static [(&'static str, &'static str)];
    type Circles = &'static [&'static [&'static str]];
    let cases: &[(Edges, Circles)] = &[
        (&[("a", "b"), ("b", "c")], &[]),
        (&[("a", "b"), ("b", "a")], &[&["a", "b"]]),
        (
            &[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")],
            &[&["a", "b", "c"]],
        ),
        (
            &[("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")],
            &[&["a", "b"], &["c", "d"]],
        ),
    ];
    for (edges, expected) in cases {
        let mut found = circles(&graph_of(edges));
        found.sort();
        let expected: Vec<Vec<String>> = expected
            .iter()
            .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
            .collect();
        assert_eq!(found, expected, "edges {edges:?}");
    }
}

/// Whether a file invokes `tokio::task_local!` (by any path that ends in `task_local`).
fn invokes_task_local(file: &syn::File) -> bool {
    struct Found(bool);
    impl<'ast> Visit<'ast> for Found {
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            if mac
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "task_local")
            {
                self.0 = true;
            }
        }
    }
    let mut found = Found(false);
    found.visit_file(file);
    found.0
}

/// Nothing rides a task-local: whatever a request's work needs (its caller's credentials above
/// all) is passed to it, so a task spawned without it cannot lose it silently.
#[test]
fn no_source_keeps_anything_in_a_task_local() {
    let mut found = Vec::new();
    for src in crates() {
        let mut files = Vec::new();
        sources(&src, &mut files);
        for file in files {
            let text = fs::read_to_string(&file).expect("a source file is readable");
            let parsed = syn::parse_file(&text).expect("a source file parses");
            if invokes_task_local(&parsed) {
                found.push(file.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "task_local! in {found:?}: pass the value instead"
    );
    let planted = syn::parse_file("tokio::task_local! { static X: u8; }").expect("parses");
    assert!(invokes_task_local(&planted), "the check sees a task-local");
}

/// The most lines a Rust file of the workspace may have: past it, a file holds more than one
/// thing a reader can keep in mind, and is split by concern.
const MOST_LINES: usize = 600;

#[test]
fn no_rust_file_is_over_six_hundred_lines() {
    let mut long = Vec::new();
    for src in crates() {
        let krate = src.parent().expect("a crate folder").to_path_buf();
        let mut files = Vec::new();
        for folder in ["src", "tests", "benches"] {
            if krate.join(folder).is_dir() {
                sources(&krate.join(folder), &mut files);
            }
        }
        for file in files {
            let lines = fs::read_to_string(&file).expect("readable").lines().count();
            if lines > MOST_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {MOST_LINES} lines, split by concern: {long:?}"
    );
}
