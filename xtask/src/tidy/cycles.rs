//! Module cycles: within a crate, no file or folder refers to one that refers back to it, directly or through others.
//! Such a pair is one concept in two places, or one that needs a third module both can use.
//!
//! A reference is a `crate::`, `super::` or `self::` path in a module's code (in a `use` tree too:
//! `use crate::{a::X, b}`). It counts between the files or folders that hold its two ends side by side, the children
//! of their nearest common module: `a::x` naming `b::y` makes `a` refer to `b`, so `a.rs` and the folder `b/` may not
//! also be joined the other way by any of their modules. A module and one inside it (`a` and `a::x`) refer to each
//! other as themselves. The crate root is left out (it declares every module and re-exports their items), and so are
//! `tests` modules (a test module sees its parent's items).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::{Problem, Repo, line_of};

/// A module, as the path of names from its crate's root (`["rpc", "client"]`).
type Module = Vec<String>;

/// Where a reference is written: the file, its line, and the path as written.
struct Witness {
    path: String,
    line: usize,
    written: String,
}

/// Every cycle among the modules of every crate of `repo`, one problem per cycle, at its first module's file.
pub(super) fn module_cycles(repo: &Repo) -> Vec<Problem> {
    let mut problems = Vec::new();
    for src in crate_sources(repo) {
        let modules = modules_of(repo, &src);
        let mut graph: BTreeMap<Module, BTreeMap<Module, Witness>> = BTreeMap::new();
        for (module, path) in &modules {
            if left_out(module) {
                continue;
            }
            graph.entry(module.clone()).or_default();
            for (target, line, written) in referenced(module, repo.text(path).unwrap_or_default()) {
                let Some(target) = resolve(&modules, &target) else { continue };
                if target == module || left_out(target) {
                    continue;
                }
                let (from, to) = side_by_side(module, target);
                graph.entry(to.clone()).or_default();
                graph.entry(from).or_default().entry(to).or_insert_with(|| Witness {
                    path: path.clone(),
                    line,
                    written,
                });
            }
        }
        let edges: BTreeMap<&Module, BTreeSet<&Module>> =
            graph.iter().map(|(from, to)| (from, to.keys().collect())).collect();
        for cycle in strongly_connected(&edges) {
            let names: Vec<String> = cycle.iter().map(|module| module.join("::")).collect();
            let mut references = Vec::new();
            for &from in &cycle {
                for (to, witness) in &graph[from] {
                    if cycle.contains(&to) {
                        let file = witness.path.strip_prefix(&format!("{src}/")).unwrap_or(&witness.path);
                        references.push(format!(
                            "{} -> {} (`{}` at {file}:{})",
                            from.join("::"),
                            to.join("::"),
                            witness.written,
                            witness.line
                        ));
                    }
                }
            }
            let file =
                |module: &Module| modules.get(module).cloned().unwrap_or_else(|| format!("{src}/{}", module.join("/")));
            problems.push(Problem {
                path: file(cycle[0]),
                line: 1,
                message: format!(
                    "modules {} of `{src}` refer to each other ({}): move what they share into a module of its own",
                    names.join(", "),
                    references.join(", ")
                ),
            });
        }
    }
    problems
}

/// The two modules a reference from `from` to `to` joins: the children of their nearest common module that hold
/// them, or `from` and `to` themselves when one holds the other.
fn side_by_side(from: &Module, to: &Module) -> (Module, Module) {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        (from.clone(), to.clone())
    } else {
        (from[..=common].to_vec(), to[..=common].to_vec())
    }
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
    LazyLock::new(|| Regex::new(r"(?:^|[^$\w])((?:crate|super|self)::)").expect("a valid pattern"));

/// The module paths `text` (the file of `module`) names in its code (comments and an inline test module dropped),
/// each with its line and the path as written.
fn referenced(module: &Module, text: &str) -> Vec<(Module, usize, String)> {
    let code = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    // Comments blanked, at the same offsets.
    let code: String = code
        .split_inclusive('\n')
        .map(|line| {
            let end = line.trim_end_matches('\n').len();
            match line[..end].find("//") {
                Some(at) => format!("{}{}{}", &line[..at], " ".repeat(end - at), &line[end..]),
                None => line.to_owned(),
            }
        })
        .collect();
    let mut found = Vec::new();
    for captures in PATH.captures_iter(&code) {
        let start = captures.get(1).expect("group 1 is the path's start").start();
        let mut at = start;
        let mut paths = Vec::new();
        use_tree(code.as_bytes(), &mut at, Vec::new(), &mut paths);
        let written: String = code[start..at].split_whitespace().collect();
        for path in paths {
            let mut names = path.into_iter();
            let mut base: Module = match names.next().as_deref() {
                Some("crate") => Vec::new(),
                Some("super") => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.clone(),
            };
            let mut names = names.peekable();
            while names.peek().map(String::as_str) == Some("super") {
                names.next();
                base.pop();
            }
            // `use crate::files::{self, ...}` names `files` itself.
            base.extend(names.filter(|name| name != "self"));
            found.push((base, line_of(&code, start), written.clone()));
        }
    }
    found
}

/// The paths of a `use` tree (or of a plain path) that starts at `code[*at]`: names joined by `::`, ending in a name,
/// `*` or a `{...}` group of trees. Leaves `*at` after it.
fn use_tree(code: &[u8], at: &mut usize, mut prefix: Vec<String>, paths: &mut Vec<Vec<String>>) {
    let skip_space = |at: &mut usize| {
        while code.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
    };
    loop {
        skip_space(at);
        match code.get(*at) {
            Some(b'{') => {
                *at += 1;
                loop {
                    skip_space(at);
                    match code.get(*at) {
                        None => return,
                        Some(b'}') => {
                            *at += 1;
                            return;
                        }
                        Some(b',') => *at += 1,
                        Some(_) => {
                            let before = *at;
                            use_tree(code, at, prefix.clone(), paths);
                            if *at == before {
                                return;
                            }
                        }
                    }
                }
            }
            Some(b'*') => {
                *at += 1;
                paths.push(prefix);
                return;
            }
            _ => {}
        }
        let start = *at;
        while code.get(*at).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_') {
            *at += 1;
        }
        if *at == start {
            if !prefix.is_empty() {
                paths.push(prefix);
            }
            return;
        }
        prefix.push(String::from_utf8_lossy(&code[start..*at]).into_owned());
        if code[*at..].starts_with(b"::") {
            *at += 2;
        } else {
            paths.push(prefix);
            return;
        }
    }
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
