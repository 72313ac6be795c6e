//! Module cycles: within a crate, no module refers (by a `crate::`, `super::` or `self::` path in its code) to one
//! that refers back to it, directly or through others. Such a pair is one concept in two places, or one that needs a
//! third module both can use. The crate root is left out (it declares every module and re-exports their items), and
//! so are `tests` modules (a test module sees its parent's items).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::{Problem, Repo};

/// A module, as the path of names from its crate's root (`["rpc", "client"]`).
type Module = Vec<String>;

/// Every cycle among the modules of every crate of `repo`, one problem per cycle, at its first module's file.
pub(super) fn module_cycles(repo: &Repo) -> Vec<Problem> {
    let mut problems = Vec::new();
    for src in crate_sources(repo) {
        let modules = modules_of(repo, &src);
        let graph: BTreeMap<&Module, BTreeSet<&Module>> = modules
            .iter()
            .map(|(module, path)| {
                let text = repo.text(path).unwrap_or_default();
                let refs = referenced(module, text).into_iter().filter_map(|r| resolve(&modules, &r));
                let refs = refs.filter(|target| *target != module && !left_out(target));
                (module, refs.collect())
            })
            .filter(|(module, _)| !left_out(module))
            .collect();
        for cycle in strongly_connected(&graph) {
            let names: Vec<String> = cycle.iter().map(|module| module.join("::")).collect();
            problems.push(Problem {
                path: modules[cycle[0]].clone(),
                line: 1,
                message: format!(
                    "modules {} of `{src}` refer to each other: move what they share into a module of its own",
                    names.join(", ")
                ),
            });
        }
    }
    problems
}

/// The `src` folders of the repository's crates: those with a `lib.rs` or `main.rs` and a `Cargo.toml` beside them.
fn crate_sources(repo: &Repo) -> BTreeSet<String> {
    repo.files
        .keys()
        .filter_map(|path| path.strip_suffix("/src/lib.rs").or_else(|| path.strip_suffix("/src/main.rs")))
        .filter(|dir| repo.files.contains_key(&format!("{dir}/Cargo.toml")))
        .map(|dir| format!("{dir}/src"))
        .collect()
}

/// The modules of the crate at `src`, each with its file; the crate roots (`lib.rs`, `main.rs`) are the empty path,
/// and `src/bin/` (other crates) is left out.
fn modules_of(repo: &Repo, src: &str) -> BTreeMap<Module, String> {
    let mut modules = BTreeMap::new();
    for path in repo.files.keys() {
        let Some(relative) = path.strip_prefix(src).and_then(|p| p.strip_prefix('/')) else { continue };
        let Some(relative) = relative.strip_suffix(".rs") else { continue };
        if relative.starts_with("bin/") {
            continue;
        }
        let mut module: Module = relative.split('/').map(str::to_owned).collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            module.pop();
        }
        modules.insert(module, path.clone());
    }
    modules
}

fn left_out(module: &Module) -> bool {
    module.is_empty() || module.iter().any(|name| name == "tests")
}

static PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^$\w])(crate|super|self)((?:::\w+)+)").expect("a valid pattern"));

/// The module paths `text` (the file of `module`) names, from its code: comments and an inline test module dropped.
fn referenced(module: &Module, text: &str) -> Vec<Module> {
    let code = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        for captures in PATH.captures_iter(line) {
            let mut base: Module = match &captures[1] {
                "crate" => Vec::new(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.clone(),
            };
            let mut rest = captures[2].split("::").skip(1).peekable();
            while rest.peek() == Some(&"super") {
                rest.next();
                base.pop();
            }
            base.extend(rest.map(str::to_owned));
            found.push(base);
        }
    }
    found
}

/// The module a path leads into: its longest prefix that is a module.
fn resolve<'m>(modules: &'m BTreeMap<Module, String>, path: &Module) -> Option<&'m Module> {
    (0..=path.len()).rev().find_map(|n| modules.get_key_value(&path[..n]).map(|(module, _)| module))
}

/// The strongly connected components of more than one module (Tarjan's algorithm), each in order.
fn strongly_connected<'m>(graph: &BTreeMap<&'m Module, BTreeSet<&'m Module>>) -> Vec<Vec<&'m Module>> {
    struct State<'m> {
        index: BTreeMap<&'m Module, usize>,
        low: BTreeMap<&'m Module, usize>,
        stack: Vec<&'m Module>,
        on_stack: BTreeSet<&'m Module>,
        components: Vec<Vec<&'m Module>>,
    }
    fn visit<'m>(v: &'m Module, graph: &BTreeMap<&'m Module, BTreeSet<&'m Module>>, state: &mut State<'m>) {
        let n = state.index.len();
        state.index.insert(v, n);
        state.low.insert(v, n);
        state.stack.push(v);
        state.on_stack.insert(v);
        for &w in graph.get(v).into_iter().flatten() {
            if !graph.contains_key(w) {
                continue;
            }
            if !state.index.contains_key(w) {
                visit(w, graph, state);
                let low = state.low[v].min(state.low[w]);
                state.low.insert(v, low);
            } else if state.on_stack.contains(w) {
                let low = state.low[v].min(state.index[w]);
                state.low.insert(v, low);
            }
        }
        if state.low[v] == state.index[v] {
            let mut component = Vec::new();
            while let Some(w) = state.stack.pop() {
                state.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.components.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, graph, &mut state);
        }
    }
    state.components
}
