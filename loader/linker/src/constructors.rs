//! The constructor list of a linked module, made fit for the startup and the loader: every entry of
//! `llvm.global_ctors` is replaced by an internal wrapper that takes main's arguments, `void (i32, ptr, ptr)`, and
//! calls the constructor.
//!
//! - The startup calls every constructor with main's arguments, and PTX calls through a function pointer only with
//!   the callee's exact prototype. C++'s constructors of global objects (clang's `_GLOBAL__sub_I_<file>`,
//!   `_GLOBAL__I_<priority>`, `__cxx_global_var_init`) and C's `__attribute__((constructor)) void f(void)` take
//!   none; the wrapper calls them without arguments, and passes them on to a constructor that takes them.
//! - The loader orders constructors of one priority as the image lists their `__init_array_object_<function>_...`
//!   globals: in PTX, the order of the constructor list; in a cubin, ptxas's, which is by name. The wrappers are named
//!   `init.<N>.<function>` with N the entry's place in the list, zero-padded, so both orders are the list's (within
//!   a translation unit, C++ initializes an inline variable before the ordered globals defined after it).
//!
//! The rewrite works on the module's text (`llvm-dis`, then `llvm-as`): `llvm.global_ctors` is one line of
//! `{ i32 <priority>, ptr @<function>, ptr <data> }` entries, and each function's `define` line gives its prototype.

use anyhow::{Result, bail};

/// The constructor list's name.
const GLOBAL_CTORS_NAME: &str = "llvm.global_ctors";
/// How `llvm-dis` starts the constructor list's line.
const GLOBAL_CTORS: &str = "@llvm.global_ctors = ";

/// Whether a module (bitcode) may have a constructor list: its name is in the module's string table as it stands.
pub fn may_have_constructors(bitcode: &[u8]) -> bool {
    bitcode.windows(GLOBAL_CTORS_NAME.len()).any(|window| window == GLOBAL_CTORS_NAME.as_bytes())
}

/// The module `ir` (LLVM assembly) with every constructor wrapped, or `None` when it has no constructor list. A
/// constructor with any other prototype than `void ()` or `void (i32, ptr, ptr)` is an error naming it.
pub fn wrap_constructors(ir: &str) -> Result<Option<String>> {
    let Some(ctors_line) = ir.lines().find(|line| line.starts_with(GLOBAL_CTORS)) else { return Ok(None) };
    let entries = constructor_entries(ctors_line)?;
    let width = entries.len().to_string().len();
    let mut rewritten_line = String::with_capacity(ctors_line.len() * 2);
    let mut wrappers = String::new();
    let mut copied = 0;
    for (index, function) in entries.into_iter().enumerate() {
        let arguments = match prototype(ir, function.text)? {
            Prototype::NoArguments => "",
            Prototype::MainArguments => "i32 %0, ptr %1, ptr %2",
        };
        let wrapper = wrapper_name(index, width, function.text);
        if ir.contains(&format!("{wrapper}(")) {
            bail!("constructor `{}`: the module already has a function named `{wrapper}`", function.text);
        }
        rewritten_line.push_str(&ctors_line[copied..function.start]);
        rewritten_line.push_str(&wrapper);
        copied = function.start + function.text.len();
        wrappers.push_str(&format!(
            "\ndefine internal void {wrapper}(i32 %0, ptr %1, ptr %2) {{\n  call void {}({arguments})\n  ret void\n}}\n",
            function.text
        ));
    }
    rewritten_line.push_str(&ctors_line[copied..]);
    let mut module = String::with_capacity(ir.len() + wrappers.len() + rewritten_line.len());
    for line in ir.lines() {
        module.push_str(if line.starts_with(GLOBAL_CTORS) { &rewritten_line } else { line });
        module.push('\n');
    }
    module.push_str(&wrappers);
    Ok(Some(module))
}

/// A constructor's function as an entry of the list names it (`@name` or `@"name"`), at byte `start` of the line.
struct Function<'a> {
    text: &'a str,
    start: usize,
}

/// The functions of the constructor list's entries, in the list's order.
fn constructor_entries(ctors_line: &str) -> Result<Vec<Function<'_>>> {
    let mut functions = Vec::new();
    // Each entry is `{ i32 <priority>, ptr <function>, ptr <data> }`; the list's type, `{ i32, ptr, ptr }`, has no
    // priority after `i32`.
    const ENTRY: &str = "{ i32 ";
    for (at, _) in ctors_line.match_indices(ENTRY) {
        let entry = &ctors_line[at + ENTRY.len()..];
        let Some((priority, rest)) = entry.split_once(", ptr ") else { continue };
        if priority.parse::<i64>().is_err() {
            continue;
        }
        let start = at + ENTRY.len() + priority.len() + ", ptr ".len();
        let length = match rest.strip_prefix("@\"") {
            Some(quoted) => quoted.find('"').map(|end| end + 3),
            None if rest.starts_with('@') => rest.find(',').filter(|&end| end > 1),
            None => None,
        };
        match length {
            Some(length) => functions.push(Function { text: &ctors_line[start..start + length], start }),
            None => {
                let shown = entry.split('}').next().unwrap_or(entry);
                bail!("a constructor entry that names no function: `{{ i32 {shown}}}`")
            }
        }
    }
    Ok(functions)
}

enum Prototype {
    /// `void ()`.
    NoArguments,
    /// `void (i32, ptr, ptr)`: what the startup calls.
    MainArguments,
}

/// The prototype of `function`, from its `define` (or `declare`) line.
fn prototype(ir: &str, function: &str) -> Result<Prototype> {
    let needle = format!(" {function}(");
    let Some((line, at)) = ir
        .lines()
        .filter(|line| line.starts_with("define ") || line.starts_with("declare "))
        .find_map(|line| line.find(&needle).map(|at| (line, at)))
    else {
        bail!("constructor `{function}` is neither defined nor declared in its module");
    };
    let return_type = line[..at].split_whitespace().last().unwrap_or_default();
    let parameters = parameter_types(&line[at + needle.len()..]);
    match (return_type, parameters.as_slice()) {
        ("void", []) => Ok(Prototype::NoArguments),
        ("void", ["i32", "ptr", "ptr"]) => Ok(Prototype::MainArguments),
        _ => bail!(
            "constructor `{function}` is `{return_type} ({})`: a constructor takes no arguments or main's \
             (int, char **, char **), and returns nothing",
            parameters.join(", ")
        ),
    }
}

/// The types of the parameters that start `list` (what follows a function's `(`): the first word of each, up to
/// the closing parenthesis. Attributes may hold parentheses of their own (`dereferenceable(8)`).
pub(crate) fn parameter_types(list: &str) -> Vec<&str> {
    let mut depth = 0usize;
    let mut parameters = Vec::new();
    let mut start = 0;
    for (index, byte) in list.bytes().enumerate() {
        match byte {
            b'(' => depth += 1,
            b')' if depth > 0 => depth -= 1,
            b')' | b',' if depth == 0 => {
                parameters.push(&list[start..index]);
                start = index + 1;
                if byte == b')' {
                    break;
                }
            }
            _ => {}
        }
    }
    parameters.into_iter().filter_map(|parameter| parameter.split_whitespace().next()).collect()
}

/// The wrapper of the list's entry `index` (of a list whose indices have `width` digits), for `function` (`@name`
/// or `@"name"`): `@"init.<index>.name"`.
fn wrapper_name(index: usize, width: usize, function: &str) -> String {
    let name = function.strip_prefix("@\"").and_then(|quoted| quoted.strip_suffix('"')).unwrap_or(&function[1..]);
    format!("@\"init.{index:0width$}.{name}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What clang-22 -O2 writes for a C++ global object with `init_priority(200)`, one without, and a C constructor
    /// with main's arguments (trimmed to the lines that matter).
    const CXX_MODULE: &str = r#"@__dso_handle = external hidden global i8
@llvm.global_ctors = appending global [3 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 200, ptr @_GLOBAL__I_000200, ptr null }, { i32, ptr, ptr } { i32 65535, ptr @_GLOBAL__sub_I_main.cpp, ptr null }, { i32, ptr, ptr } { i32 101, ptr @setup, ptr null }]

define linkonce_odr dso_local void @_ZN3ObjD1Ev(ptr noundef nonnull align 8 dereferenceable(12) %0) unnamed_addr #0 comdat align 2 {
  ret void
}

define dso_local void @setup(i32 %0, ptr readnone captures(none) %1, ptr readnone captures(none) %2) #0 {
  ret void
}

define internal void @_GLOBAL__I_000200() #6 {
  ret void
}

define internal void @_GLOBAL__sub_I_main.cpp() #6 {
  ret void
}

attributes #6 = { nounwind }
"#;

    #[test]
    fn every_constructor_gets_a_wrapper_with_mains_arguments_named_in_list_order() {
        let module = wrap_constructors(CXX_MODULE).unwrap().expect("a constructor list");
        let ctors = module.lines().find(|line| line.starts_with(GLOBAL_CTORS)).unwrap();
        assert_eq!(
            ctors,
            CXX_MODULE
                .lines()
                .nth(1)
                .unwrap()
                .replace("@_GLOBAL__I_000200,", "@\"init.0._GLOBAL__I_000200\",")
                .replace("@_GLOBAL__sub_I_main.cpp,", "@\"init.1._GLOBAL__sub_I_main.cpp\",")
                .replace("@setup,", "@\"init.2.setup\",")
        );
        assert!(module.contains(
            "define internal void @\"init.1._GLOBAL__sub_I_main.cpp\"(i32 %0, ptr %1, ptr %2) {\n  \
             call void @_GLOBAL__sub_I_main.cpp()\n  ret void\n}\n"
        ));
        assert!(module.contains(
            "define internal void @\"init.2.setup\"(i32 %0, ptr %1, ptr %2) {\n  \
             call void @setup(i32 %0, ptr %1, ptr %2)\n  ret void\n}\n"
        ));
        assert_eq!(module.matches("define internal void @\"init.").count(), 3);
        // Everything else is kept as it was.
        for line in CXX_MODULE.lines().filter(|line| !line.starts_with(GLOBAL_CTORS)) {
            assert!(module.contains(line), "{line}");
        }
    }

    #[test]
    fn only_a_module_with_a_constructor_list_is_rewritten() {
        assert!(wrap_constructors("define void @main() {\n  ret void\n}\n").unwrap().is_none());
    }

    #[test]
    fn indices_are_padded_so_that_names_sort_in_list_order() {
        let entries: Vec<String> =
            (0..11).map(|i| format!("{{ i32, ptr, ptr }} {{ i32 {}, ptr @f{i}, ptr null }}", 65535 - i % 2)).collect();
        let definitions: String = (0..11).map(|i| format!("define void @f{i}() {{\n  ret void\n}}\n")).collect();
        let module = format!(
            "@llvm.global_ctors = appending global [11 x {{ i32, ptr, ptr }}] [{}]\n{definitions}",
            entries.join(", ")
        );
        let rewritten = wrap_constructors(&module).unwrap().unwrap();
        let ctors = rewritten.lines().next().unwrap();
        let names: Vec<&str> = ctors.split("ptr @\"").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
        assert_eq!(names.first(), Some(&"init.00.f0"));
        assert_eq!(names.last(), Some(&"init.10.f10"));
        assert!(names.is_sorted(), "{names:?}");
    }

    #[test]
    fn quoted_names_declarations_and_entries_sharing_a_function() {
        let module = "@llvm.global_ctors = appending global [3 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 7, ptr \
                      @\"odd name\", ptr null }, { i32, ptr, ptr } { i32 9, ptr @\"odd name\", ptr @key }, { i32, ptr, \
                      ptr } { i32 8, ptr @elsewhere, ptr null }]\ndeclare void @elsewhere()\ndefine internal void \
                      @\"odd name\"() {\n  ret void\n}\n";
        let rewritten = wrap_constructors(module).unwrap().unwrap();
        assert!(rewritten.contains("{ i32 7, ptr @\"init.0.odd name\", ptr null }"), "{rewritten}");
        assert!(rewritten.contains("{ i32 9, ptr @\"init.1.odd name\", ptr @key }"), "{rewritten}");
        assert!(rewritten.contains("{ i32 8, ptr @\"init.2.elsewhere\", ptr null }"), "{rewritten}");
        assert_eq!(rewritten.matches("call void @\"odd name\"()").count(), 2);
        assert!(rewritten.contains("call void @elsewhere()"));
    }

    #[test]
    fn other_prototypes_are_named() {
        for (definition, shown) in [
            ("define dso_local noundef i32 @bad() #0 {", "`@bad` is `i32 ()`"),
            ("define void @bad(i32 %0) {", "`@bad` is `void (i32)`"),
            ("define void @bad(ptr noundef dereferenceable(8) %0, i64 %1) {", "`@bad` is `void (ptr, i64)`"),
        ] {
            let module = format!(
                "@llvm.global_ctors = appending global [1 x {{ i32, ptr, ptr }}] [{{ i32, ptr, ptr }} {{ i32 5, ptr \
                 @bad, ptr null }}]\n{definition}\n"
            );
            let error = wrap_constructors(&module).unwrap_err().to_string();
            assert!(error.contains(shown) && error.contains("main's (int, char **, char **)"), "{error}");
        }
        let no_function = "@llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 5, \
                           ptr null, ptr null }]\n";
        let error = wrap_constructors(no_function).unwrap_err().to_string();
        assert!(error.contains("names no function: `{ i32 5, ptr null, ptr null }`"), "{error}");
        let missing = "@llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 5, ptr \
                       @gone, ptr null }]\n";
        assert!(wrap_constructors(missing).unwrap_err().to_string().contains("`@gone` is neither defined"));
    }

    #[test]
    fn parameter_types_skip_attributes_and_their_parentheses() {
        assert_eq!(parameter_types(") #0 {"), Vec::<&str>::new());
        assert_eq!(
            parameter_types("i32 noundef %0, ptr align(8) dereferenceable(16) %1, ptr %2) {"),
            ["i32", "ptr", "ptr"]
        );
    }

    #[test]
    fn only_bitcode_that_names_the_list_is_disassembled() {
        assert!(may_have_constructors(b"BC\xc0\xde....llvm.global_ctorsllvm.used"));
        assert!(!may_have_constructors(b"BC\xc0\xde....llvm.global_dtors"));
    }
}
