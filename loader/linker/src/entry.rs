//! The program's `main` as the startup calls it: `i32 (i32, ptr, ptr)`, main's arguments with the environment.
//!
//! PTX calls a function only with its exact prototype, and rustc's `main` for a std program takes `(argc, argv)`.
//! Such a `main` is renamed `__gpu_startup_program_main`, and a `main` with the startup's prototype that calls it
//! takes its place; where std defines how a thread ends after `main` (its thread-locals' destructors), the wrapper
//! does that too. A `main` of the startup's prototype is left as it is; any other is an error naming it.
//!
//! The rewrite works on the module's text, with the thread-locals' (a std program has both).

use anyhow::{Result, bail};
use gpu_startup_protocol::abi::LIBTEST_MARKER;

/// What the program's own `main` is renamed when the startup's `main` wraps it.
const RENAMED: &str = "__gpu_startup_program_main";

/// What std defines to end a thread after its `main` returned
/// (`loader/setup/std-patches/0006-gpu-threads-named-and-ended.patch`).
const THREAD_EXIT: &str = "__gpu_startup_std_thread_exit";

/// Whether `ir` is a libtest binary: it defines libtest's entry, `test::test_main_static` (or its `_abort` form,
/// which rustc's test harness calls when tests are built with `panic = "abort"`).
fn links_libtest(ir: &str) -> bool {
    // Both manglings spell the path `4test16test_main_static` (`_ZN...` and `_R...`); `_abort` adds to the name.
    ir.lines().any(|line| {
        line.starts_with("define ")
            && (line.contains("4test16test_main_static") || line.contains("4test22test_main_static_abort"))
    })
}

/// Whether `ir` calls libtest's `test::test_main_static`: the harness of tests built without `panic = "abort"`, which
/// runs each test on a thread it spawns, where the GPU has no thread to give.
pub fn calls_the_spawning_harness(ir: &str) -> bool {
    // A use names the symbol after `@`; debug information names it only as a string (`linkageName: "..."`).
    ir.lines().filter(|line| !line.starts_with("define ") && !line.starts_with("declare ")).any(|line| {
        line.split('@').skip(1).any(|after| {
            after.split(['(', ',', ' ']).next().is_some_and(|symbol| symbol.contains("4test16test_main_static"))
        })
    })
}

/// Whether `ir` defines the function `name`.
fn defines(ir: &str, name: &str) -> bool {
    let called = format!(" @{name}(");
    ir.lines().any(|line| line.starts_with("define ") && line.contains(&called))
}

/// `ir` (LLVM assembly) with its `main` given the startup's prototype, or `None` when it has it already or defines
/// no `main`.
pub fn wrap_main(ir: &str) -> Result<Option<String>> {
    let Some((index, define)) =
        ir.lines().enumerate().find(|(_, line)| line.starts_with("define ") && line.contains(" @main("))
    else {
        return Ok(None);
    };
    let at = define.find(" @main(").expect("found above");
    let return_type = define[..at].split_whitespace().last().unwrap_or_default();
    let parameters = crate::constructors::parameter_types(&define[at + " @main(".len()..]);
    let call = match (return_type, parameters.as_slice()) {
        ("i32", ["i32", "ptr", "ptr"]) => return Ok(None),
        ("i32", ["i32", "ptr"]) => format!("call i32 @{RENAMED}(i32 %0, ptr %1)"),
        ("i32", []) => format!("call i32 @{RENAMED}()"),
        _ => bail!(
            "`main` is `{return_type} ({})`: the startup calls `int main(int, char **, char **)`, and takes a `main` \
             of that prototype, of `(int, char **)` or of none",
            parameters.join(", ")
        ),
    };
    if ir.contains(&format!("@{RENAMED}(")) {
        bail!("the module already has a function named `{RENAMED}`");
    }
    let mut module = String::with_capacity(ir.len() + 160);
    for (number, line) in ir.lines().enumerate() {
        if number == index {
            module.push_str(&line.replacen(" @main(", &format!(" @{RENAMED}("), 1));
        } else {
            module.push_str(line);
        }
        module.push('\n');
    }
    // std ends a thread that ran `main` (its thread-locals' destructors, then its handle) where it defines how.
    let thread_exit = if defines(ir, THREAD_EXIT) { format!("  call void @{THREAD_EXIT}()\n") } else { String::new() };
    // The entry block takes `%3`, so the call's result is `%4`.
    module.push_str(&format!(
        "\ndefine i32 @main(i32 %0, ptr %1, ptr %2) {{\n  %4 = {call}\n{thread_exit}  ret i32 %4\n}}\n"
    ));
    if links_libtest(ir) {
        module.push_str(&format!("\n@{LIBTEST_MARKER} = constant i8 1\n"));
    }
    Ok(Some(module))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How rustc defines a std program's `main`, and what the startup's kernel does with it.
    const STD_MAIN: &str = "define noundef i32 @main(i32 %0, ptr %1) unnamed_addr #3 {\n  ret i32 0\n}\n\n\
                            define void @_start() {\n  %r = call i32 @main(i32 1, ptr null, ptr null)\n  ret void\n}\n";

    #[test]
    fn a_main_with_argc_and_argv_is_wrapped_and_its_callers_reach_the_wrapper() {
        let wrapped = wrap_main(STD_MAIN).unwrap().unwrap();
        assert!(
            wrapped.starts_with("define noundef i32 @__gpu_startup_program_main(i32 %0, ptr %1) unnamed_addr #3 {")
        );
        assert!(wrapped.contains("%r = call i32 @main(i32 1, ptr null, ptr null)"), "{wrapped}");
        assert!(wrapped.contains(
            "define i32 @main(i32 %0, ptr %1, ptr %2) {\n  %4 = call i32 @__gpu_startup_program_main(i32 %0, ptr %1)\n"
        ));
    }

    #[test]
    fn the_wrapper_ends_the_thread_as_std_does_where_std_defines_how() {
        let with_std = format!("{STD_MAIN}\ndefine void @{THREAD_EXIT}() {{\n  ret void\n}}\n");
        let wrapped = wrap_main(&with_std).unwrap().unwrap();
        assert!(wrapped.contains(&format!(
            "  %4 = call i32 @__gpu_startup_program_main(i32 %0, ptr %1)\n  call void @{THREAD_EXIT}()\n  ret i32 %4\n"
        )));
        assert!(!wrap_main(STD_MAIN).unwrap().unwrap().contains(THREAD_EXIT));
    }

    #[test]
    fn a_libtest_binary_is_marked_for_the_loader() {
        let harness =
            format!("{STD_MAIN}\ndefine void @_RNvCs1234_4test22test_main_static_abort() {{\n  ret void\n}}\n");
        assert!(wrap_main(&harness).unwrap().unwrap().ends_with(&format!("@{LIBTEST_MARKER} = constant i8 1\n")));
        assert!(!wrap_main(STD_MAIN).unwrap().unwrap().contains(LIBTEST_MARKER));
    }

    #[test]
    fn a_harness_that_would_spawn_a_thread_per_test_is_recognised() {
        let callee = "_RNvCs1234_4test16test_main_static";
        let unwinding = format!(
            "define noundef i32 @main(i32 %0, ptr %1) {{\n  call void @{callee}(ptr @tests, i64 2)\n  ret i32 0\n}}\n\
             define void @{callee}(ptr %0, i64 %1) {{\n  ret void\n}}\n"
        );
        assert!(calls_the_spawning_harness(&unwinding));
        // Defined but not called (libtest defines both entries), or named by debug information: not a use.
        let aborting = unwinding.replace(
            "call void @_RNvCs1234_4test16test_main_static",
            "call void @_RNvCs1234_4test22test_main_static_abort",
        ) + &format!("!7 = !DISubprogram(name: \"test_main_static\", linkageName: \"{callee}\")\n");
        assert!(!calls_the_spawning_harness(&aborting));
        let legacy = unwinding.replace(callee, "_ZN4test16test_main_static17h0123456789abcdefE");
        assert!(calls_the_spawning_harness(&legacy));
    }

    #[test]
    fn a_main_without_parameters_is_wrapped_and_one_of_the_startups_prototype_is_left_alone() {
        let without = "define i32 @main() {\n  ret i32 0\n}\n";
        assert!(wrap_main(without).unwrap().unwrap().contains("%4 = call i32 @__gpu_startup_program_main()"));
        let startups = "define i32 @main(i32 %0, ptr %1, ptr %2) {\n  ret i32 0\n}\n";
        assert_eq!(wrap_main(startups).unwrap(), None);
        assert_eq!(wrap_main("define void @f() {\n  ret void\n}\n").unwrap(), None);
    }

    #[test]
    fn a_main_of_another_prototype_is_an_error_naming_it() {
        let error = wrap_main("define void @main(i64 %0) {\n  ret void\n}\n").unwrap_err().to_string();
        assert!(error.starts_with("`main` is `void (i64)`"), "{error}");
    }
}
