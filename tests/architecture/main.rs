//! The shape of the runner's code, checked from its source: `host/src` is parsed with
//! `syn` (the module tree from `lib.rs`, following `mod` declarations) and these rules are
//! asserted on everything outside `#[cfg(test)]` code:
//!
//! 1. no function is longer than [`MAX_FUNCTION_LINES`] lines;
//! 2. no import cycle between modules: at every level of the module tree (the crate's
//!    top-level modules, then the submodules of each directory module) the modules import
//!    each other without a cycle. A module's imports of its own ancestors or descendants
//!    (`super::Type`, `mod.rs` using its children) are its inside, not an edge;
//! 3. `measuring/` and `outputs/report` import nothing from `servers/sim`, nor the
//!    simulator from them: the built-in server is one target among others, and what the
//!    two sides share (the precise timer, the request-id header, the kernel's receive
//!    times) lives in `both_sides/`;
//! 4. `host/src` holds at most [`MAX_TOP_LEVEL_ENTRIES`] entries besides `lib.rs` and
//!    `main.rs`, and no two public types (`pub` struct, enum, trait or type alias) share a
//!    name anywhere in the crate;
//! 5. README.md's layout of `host/src` (each group and the modules directly inside it,
//!    with the first sentence of each one's `//!` documentation) is the source tree's;
//!    `RUNNER_BLESS=1` rewrites it.
//!
//! An import is any path the code names (`use` items, and paths in types, expressions,
//! patterns and macro names) that starts with `crate`, `super`, `self` or the name of a
//! submodule. Paths written only inside a macro's arguments (`format!`, `tokio::select!`)
//! are not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest function allowed in `host/src`, in lines, signature to closing brace.
const MAX_FUNCTION_LINES: usize = 80;

/// Modules that must not import the simulator, nor be imported by it: all of `measuring/`
/// and the reports.
const MEASURING_SIDE: [&[&str]; 2] = [&["measuring"], &["outputs", "report"]];

/// The built-in simulated server.
const SIMULATOR: &[&str] = &["servers", "sim"];

/// A module path from the crate root: `["engine", "dispatch"]`; the root is `[]`.
type ModPath = Vec<String>;

/// One source file of the crate and what it names.
struct Module {
    path: ModPath,
    file: PathBuf,
    /// Submodules declared in the file (with a file of their own).
    children: Vec<String>,
    /// Every crate path the file names, resolved to absolute item paths.
    names: BTreeSet<ModPath>,
    /// Functions outside test code: (first line, name, lines).
    functions: Vec<(usize, String, usize)>,
    /// The first sentence of the file's `//!` documentation, on one line.
    summary: String,
    /// Public types outside test code (`pub` structs, enums, traits and type aliases):
    /// (line, name).
    public_types: Vec<(usize, String)>,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test")))
            || a.path().is_ident("test")
    })
}

/// Loads the file of module `path` and, recursively, its submodules.
fn load(path: ModPath, file: PathBuf, out: &mut Vec<Module>) {
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut names = Names {
        module: path.clone(),
        inline: Vec::new(),
        children: Vec::new(),
        found: BTreeSet::new(),
        functions: Vec::new(),
        public_types: Vec::new(),
    };
    names.visit_file(&ast);
    // A module's own directory: `src/` for lib.rs, `x/` for x.rs and x/mod.rs.
    let dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "mod.rs") => file.parent().map(Path::to_path_buf),
        _ => Some(file.with_extension("")),
    }
    .expect("a source file has a directory");
    let children = names.children.clone();
    out.push(Module {
        path: path.clone(),
        file,
        children: children.clone(),
        names: names.found,
        functions: names.functions,
        summary: first_sentence(&ast.attrs),
        public_types: names.public_types,
    });
    for child in children {
        let flat = dir.join(format!("{child}.rs"));
        let nested = dir.join(&child).join("mod.rs");
        let file = if flat.exists() { flat } else { nested };
        let mut child_path = path.clone();
        child_path.push(child);
        load(child_path, file, out);
    }
}

/// Collects what one file declares and names.
struct Names {
    module: ModPath,
    /// Inline (non-test) modules the visitor is inside, e.g. `mod bindings { … }`.
    inline: Vec<String>,
    children: Vec<String>,
    found: BTreeSet<ModPath>,
    functions: Vec<(usize, String, usize)>,
    public_types: Vec<(usize, String)>,
}

/// The first sentence of a file's inner doc comment (`//!`): its first paragraph up to
/// the first full stop followed by a space, joined onto one line, with rustdoc's link
/// brackets around a code span dropped (`[`RunConfig`]` is `RunConfig` in backticks).
fn first_sentence(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        if !nv.path.is_ident("doc") {
            continue;
        }
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) = &nv.value
        else {
            continue;
        };
        let line = text.value().trim().to_string();
        if line.is_empty() {
            if lines.is_empty() {
                continue;
            }
            break; // the end of the first paragraph
        }
        lines.push(line);
    }
    let paragraph = lines.join(" ").replace("[`", "`").replace("`]", "`");
    match paragraph.find(". ") {
        Some(at) => paragraph[..=at].to_string(),
        None => paragraph,
    }
}

impl Names {
    /// The module the code being visited is in.
    fn here(&self) -> ModPath {
        self.module.iter().chain(&self.inline).cloned().collect()
    }

    /// Resolves a path's leading `crate`, `super`, `self` or submodule name.
    fn resolve(&mut self, segments: Vec<String>) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut here = self.here();
        let rest = match first.as_str() {
            "crate" => {
                here.clear();
                &segments[1..]
            }
            "self" => &segments[1..],
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                here.truncate(here.len().saturating_sub(ups));
                &segments[ups..]
            }
            name if self.inline.is_empty() && self.children.iter().any(|c| c == name) => {
                &segments[..]
            }
            _ => return,
        };
        here.extend(rest.iter().cloned());
        self.found.insert(here);
    }

    fn record_type(&mut self, vis: &syn::Visibility, name: &syn::Ident) {
        if matches!(vis, syn::Visibility::Public(_)) {
            self.public_types
                .push((name.span().start().line, name.to_string()));
        }
    }

    fn record_function(&mut self, name: &syn::Ident, start: proc_macro2::Span, block: &syn::Block) {
        let first = start.start().line;
        let last = block.brace_token.span.close().end().line;
        self.functions
            .push((first, name.to_string(), last.saturating_sub(first) + 1));
    }
}

/// Every full path a `use` tree names (a glob names its module).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push(prefix.clone()),
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        match &m.content {
            None => self.children.push(m.ident.to_string()),
            Some(_) => {
                self.inline.push(m.ident.to_string());
                syn::visit::visit_item_mod(self, m);
                self.inline.pop();
            }
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut paths);
        for p in paths {
            self.resolve(p);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            self.resolve(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_struct(&mut self, i: &'ast syn::ItemStruct) {
        self.record_type(&i.vis, &i.ident);
        syn::visit::visit_item_struct(self, i);
    }

    fn visit_item_enum(&mut self, i: &'ast syn::ItemEnum) {
        self.record_type(&i.vis, &i.ident);
        syn::visit::visit_item_enum(self, i);
    }

    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        self.record_type(&i.vis, &i.ident);
        syn::visit::visit_item_trait(self, i);
    }

    fn visit_item_type(&mut self, i: &'ast syn::ItemType) {
        self.record_type(&i.vis, &i.ident);
        syn::visit::visit_item_type(self, i);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record_function(&f.sig.ident, f.sig.fn_token.span(), &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            self.record_function(&f.sig.ident, f.sig.fn_token.span(), &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record_function(&f.sig.ident, f.sig.fn_token.span(), block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The crate's modules, from lib.rs down.
fn modules() -> Vec<Module> {
    let mut out = Vec::new();
    load(Vec::new(), src().join("lib.rs"), &mut out);
    out
}

/// Edges between modules, one per (importing module, imported module) pair.
fn edges(modules: &[Module]) -> BTreeSet<(ModPath, ModPath)> {
    let known: BTreeSet<&ModPath> = modules.iter().map(|m| &m.path).collect();
    let mut out = BTreeSet::new();
    for m in modules {
        for name in &m.names {
            // The module a name lives in: its longest prefix that is a module.
            let target = (0..=name.len())
                .rev()
                .map(|n| name[..n].to_vec())
                .find(|p| known.contains(p))
                .unwrap_or_default();
            if target != m.path {
                out.insert((m.path.clone(), target));
            }
        }
    }
    out
}

fn shown(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        format!("crate::{}", path.join("::"))
    }
}

fn relative(file: &Path) -> String {
    file.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .unwrap_or(file)
        .display()
        .to_string()
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let mut long = Vec::new();
    let mut longest = (0, String::new());
    for m in modules() {
        for (line, name, lines) in &m.functions {
            if *lines > longest.0 {
                longest = (*lines, format!("{}:{line} {name}", relative(&m.file)));
            }
            if *lines > MAX_FUNCTION_LINES {
                long.push(format!(
                    "{}:{line} `{name}`: {lines} lines",
                    relative(&m.file)
                ));
            }
        }
    }
    println!("longest function: {} lines ({})", longest.0, longest.1);
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The cycles among the siblings under each module: at every level, an edge from one
/// subtree to another is an edge between the two siblings that hold them.
fn sibling_cycles(edges: &BTreeSet<(ModPath, ModPath)>) -> Vec<Vec<ModPath>> {
    let mut levels: BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<ModPath>>> = BTreeMap::new();
    for (from, to) in edges {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // one contains the other
        }
        let (a, b) = (from[..=common].to_vec(), to[..=common].to_vec());
        levels
            .entry(from[..common].to_vec())
            .or_default()
            .entry(a)
            .or_default()
            .insert(b);
    }
    levels.values().flat_map(cycles).collect()
}

/// Strongly connected components of more than one node (Tarjan's algorithm, recursive:
/// the graphs are a few dozen nodes).
fn cycles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, (usize, usize)>,
        stack: Vec<&'g ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g ModPath) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            let graph = self.graph;
            for w in graph.get(v).into_iter().flatten() {
                match self.index.get(w).copied() {
                    None => {
                        self.visit(w);
                        let low = self.index[w].1.min(self.index[v].1);
                        self.index.get_mut(v).expect("visited").1 = low;
                    }
                    Some((wi, _)) if self.stack.contains(&w) => {
                        let low = wi.min(self.index[v].1);
                        self.index.get_mut(v).expect("visited").1 = low;
                    }
                    Some(_) => {}
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let at = self
                    .stack
                    .iter()
                    .rposition(|x| *x == v)
                    .expect("on the stack");
                let component: Vec<ModPath> = self.stack.drain(at..).cloned().collect();
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_import_cycle_between_modules() {
    let modules = modules();
    let edges = edges(&modules);
    let found = sibling_cycles(&edges);
    let report: Vec<String> = found
        .iter()
        .map(|cycle| {
            let members: Vec<String> = cycle.iter().map(|p| shown(p)).collect();
            // The file-level imports that close the cycle, for whoever fixes it.
            let inside = |p: &ModPath, m: &ModPath| m.starts_with(p);
            let links: Vec<String> = edges
                .iter()
                .filter(|(f, t)| {
                    cycle.iter().any(|a| inside(a, f))
                        && cycle.iter().any(|b| inside(b, t))
                        && !cycle.iter().any(|c| inside(c, f) && inside(c, t))
                })
                .map(|(f, t)| format!("    {} -> {}", shown(f), shown(t)))
                .collect();
            format!("{}\n{}", members.join(" <-> "), links.join("\n"))
        })
        .collect();
    println!("{} modules, {} import edges", modules.len(), edges.len());
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn the_measuring_side_and_the_simulator_do_not_import_each_other() {
    let modules = modules();
    let under = |p: &ModPath, prefix: &[&str]| {
        p.len() >= prefix.len() && p.iter().zip(prefix).all(|(a, b)| a == b)
    };
    let measuring = |p: &ModPath| MEASURING_SIDE.iter().any(|side| under(p, side));
    let simulator = |p: &ModPath| under(p, SIMULATOR);
    let mut offenders = Vec::new();
    for (from, to) in edges(&modules) {
        let crosses = (measuring(&from) && simulator(&to)) || (simulator(&from) && measuring(&to));
        if crosses {
            offenders.push(format!("{} imports {}", shown(&from), shown(&to)));
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

/// The checks see what they claim to: the module tree is complete and the parser finds
/// the imports and functions a file is known to have.
#[test]
fn the_checks_see_the_whole_crate() {
    let modules = modules();
    let files: BTreeSet<PathBuf> = modules.iter().map(|m| m.file.clone()).collect();
    assert_eq!(files.len(), modules.len(), "each module has one file");
    let engine = modules
        .iter()
        .find(|m| m.path == ["measuring", "engine"])
        .expect("crate::measuring::engine is loaded");
    assert!(engine.children.iter().any(|c| c == "dispatch"));
    let edges = edges(&modules);
    let has = |from: &[&str], to: &[&str]| edges.iter().any(|(f, t)| f == from && t == to);
    assert!(
        has(
            &["measuring", "engine", "dispatch"],
            &["both_sides", "timer"]
        ),
        "engine::dispatch uses crate::both_sides::timer"
    );
    assert!(
        has(&["servers", "sim", "server"], &["both_sides", "wire"]),
        "sim::server uses crate::both_sides::wire"
    );
    assert!(modules
        .iter()
        .any(|m| m.functions.iter().any(|(_, name, _)| name == "run")));
    // A cycle is found when there is one.
    let mut graph = BTreeMap::new();
    let (a, b) = (vec!["a".to_string()], vec!["b".to_string()]);
    graph.insert(a.clone(), BTreeSet::from([b.clone()]));
    graph.insert(b.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(cycles(&graph).len(), 1);
}

/// The most entries `host/src` may hold besides `lib.rs` and `main.rs`: the crate is read
/// by its groups, and a newcomer finds a module by its group's name.
const MAX_TOP_LEVEL_ENTRIES: usize = 10;

#[test]
fn host_src_has_few_top_level_entries() {
    let mut entries: Vec<String> = std::fs::read_dir(src())
        .expect("host/src is readable")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name != "lib.rs" && name != "main.rs")
        .collect();
    entries.sort();
    println!(
        "host/src: {} entries besides lib.rs and main.rs: {}",
        entries.len(),
        entries.join(", ")
    );
    assert!(
        entries.len() <= MAX_TOP_LEVEL_ENTRIES,
        "host/src holds {} entries besides lib.rs and main.rs, at most {MAX_TOP_LEVEL_ENTRIES} allowed (put a new module in one of the groups): {}",
        entries.len(),
        entries.join(", ")
    );
}

#[test]
fn no_two_public_types_share_a_name() {
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in modules() {
        for (line, name) in &m.public_types {
            by_name
                .entry(name.clone())
                .or_default()
                .push(format!("{}:{line}", relative(&m.file)));
        }
    }
    println!("{} public type names", by_name.len());
    let shared: Vec<String> = by_name
        .iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|(name, places)| format!("`{name}`: {}", places.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "public types (pub struct/enum/trait/type) sharing a name:\n{}",
        shared.join("\n")
    );
}

/// The lines that open and close the generated layout in README.md.
const LAYOUT_BEGIN: &str =
    "<!-- layout: generated by tests/architecture, RUNNER_BLESS=1 rewrites it -->";
const LAYOUT_END: &str = "<!-- /layout -->";

/// The layout of `host/src` as the README shows it: each group (a module of `lib.rs`) and
/// each module directly inside it, with the first sentence of its `//!` documentation.
/// Deeper modules are left out, so that reshuffling inside a module changes nothing here.
fn layout(modules: &[Module]) -> String {
    let entry = |m: &Module| {
        let name = m.path.last().expect("not the crate root");
        let is_dir = m.file.file_name().is_some_and(|f| f == "mod.rs");
        let shown = if is_dir {
            format!("{name}/")
        } else {
            format!("{name}.rs")
        };
        (shown, m.summary.clone())
    };
    let mut groups: Vec<&Module> = modules.iter().filter(|m| m.path.len() == 1).collect();
    groups.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out = String::new();
    for group in groups {
        let (name, summary) = entry(group);
        out.push_str(&format!("- `host/src/{name}`: {summary}\n"));
        let mut children: Vec<&Module> = modules
            .iter()
            .filter(|m| m.path.len() == 2 && m.path.starts_with(&group.path))
            .collect();
        children.sort_by(|a, b| a.path.cmp(&b.path));
        for child in children {
            let (name, summary) = entry(child);
            out.push_str(&format!("  - `{name}`: {summary}\n"));
        }
    }
    out
}

/// A line diff, `-` for the README's lines and `+` for the generated ones (a longest
/// common subsequence; the blocks are a few dozen lines).
fn line_diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || common[i + 1][j] >= common[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}

#[test]
fn the_readme_layout_is_the_source_tree() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md is readable");
    let begin = readme
        .find(LAYOUT_BEGIN)
        .map(|at| at + LAYOUT_BEGIN.len() + 1)
        .unwrap_or_else(|| panic!("README.md has no line `{LAYOUT_BEGIN}`"));
    let end = begin
        + readme[begin..]
            .find(LAYOUT_END)
            .unwrap_or_else(|| panic!("README.md has no line `{LAYOUT_END}` after the layout"));
    let generated = layout(&modules());
    let written = &readme[begin..end];
    if written == generated {
        return;
    }
    if std::env::var_os("RUNNER_BLESS").is_some_and(|v| v == "1") {
        let blessed = format!("{}{generated}{}", &readme[..begin], &readme[end..]);
        std::fs::write(&readme_path, blessed).expect("README.md is writable");
        println!("README.md's layout rewritten");
        return;
    }
    panic!(
        "README.md's layout (between `{LAYOUT_BEGIN}` and `{LAYOUT_END}`) is not the source \
         tree's; regenerate it with\n    RUNNER_BLESS=1 cargo test --release -p runner --test \
         architecture\ndifference (- README, + source):\n{}",
        line_diff(written, &generated)
    );
}

#[test]
fn the_layout_diff_shows_what_changed() {
    assert_eq!(line_diff("a\nb\nc\n", "a\nc\nd\n"), "- b\n+ d\n");
    assert_eq!(line_diff("", "x\n"), "+ x\n");
}
