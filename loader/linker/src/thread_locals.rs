//! Thread-locals as the runtime keeps them: every access to a `thread_local` global goes through
//! `__emutls_get_address`, which the startup defines and which returns the calling GPU thread's copy.
//!
//! NVPTX has no thread-local storage, so std is built with `"tls-model": "emulated"`. LLVM's `lower-emutls` pass
//! (run by `opt` before this rewrite) adds each thread-local's control variable, `__emutls_v.<name>` (size,
//! alignment, an index the runtime assigns, the initial value), but leaves the accesses as
//! `llvm.threadlocal.address(@<name>)` calls, which LLVM would lower only in instruction selection. By then the
//! NVPTX passes have made `@<name>` an address-space cast, and the verifier stops llc ("llvm.threadlocal.address
//! first argument must be a GlobalValue"). So each such call becomes `__emutls_get_address(@__emutls_v.<name>)`
//! here, and the thread-local globals themselves are left for `globaldce`.
//!
//! The rewrite works on the module's text (`llvm-dis`, then `llvm-as`), as the constructors' does.

use anyhow::{Result, bail};

/// The intrinsic every access to a thread-local goes through (with its overload suffix, `.p0`).
pub const INTRINSIC: &str = "llvm.threadlocal.address";

/// What `lower-emutls` names a thread-local's control variable: this, then the thread-local's name.
const CONTROL_PREFIX: &str = "__emutls_v.";

/// The runtime's function that returns the calling thread's copy of a thread-local, given its control variable.
const GET_ADDRESS: &str = "__emutls_get_address";

/// Whether a module (bitcode) may access thread-locals: the intrinsic's name is in its string table.
pub fn may_have_thread_locals(bitcode: &[u8]) -> bool {
    bitcode.windows(INTRINSIC.len()).any(|window| window == INTRINSIC.as_bytes())
}

/// The module `ir` (LLVM assembly, after `lower-emutls`) with every `llvm.threadlocal.address` call made a call of
/// `__emutls_get_address` on the thread-local's control variable, or `None` when it makes no such call. A call on
/// anything but a named global, or on a global without a control variable, is an error naming it.
pub fn rewrite_thread_locals(ir: &str) -> Result<Option<String>> {
    let call = format!("@{INTRINSIC}.p0(ptr ");
    let global_call = format!("@{INTRINSIC}.p1(ptr addrspace(1) ");
    if !ir.contains(&call) && !ir.contains(&global_call) {
        return Ok(None);
    }
    // The runtime's function, declared once unless the module already has it (the startup defines it).
    let has_get_address = ir.lines().any(|line| {
        (line.starts_with("define ") || line.starts_with("declare ")) && line.contains(&format!("@{GET_ADDRESS}("))
    });
    let mut module = String::with_capacity(ir.len() + 64);
    for line in ir.lines() {
        if line.starts_with("declare ") && line.contains(&format!("@{INTRINSIC}.")) {
            continue;
        }
        if line.contains(&global_call) {
            module.push_str(&rewrite_global_access(line, &global_call, ir)?);
        } else if is_control_variable(line) {
            module.push_str(&generic_initial_value(line));
        } else {
            module.push_str(&rewrite_line(line, &call, ir)?);
        }
        module.push('\n');
    }
    if !has_get_address {
        module.push_str(&format!("declare ptr @{GET_ADDRESS}(ptr)\n"));
    }
    Ok(Some(module))
}

/// `line` with each of its calls of the intrinsic (`call`: `@llvm.threadlocal.address.p0(ptr `) rewritten.
fn rewrite_line(line: &str, call: &str, ir: &str) -> Result<String> {
    let mut rewritten = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = rest.find(call) {
        let argument = &rest[at + call.len()..];
        let (global, control) = accessed(argument, ir)?;
        rewritten.push_str(&rest[..at]);
        rewritten.push_str(&format!("@{GET_ADDRESS}(ptr {control}"));
        rest = &argument[global.len()..];
    }
    rewritten.push_str(rest);
    Ok(rewritten)
}

/// `line`, an access to a thread-local in AMD's global address space (`%r = [tail] call ... ptr addrspace(1)
/// @llvm.threadlocal.address.p1(ptr addrspace(1) @X)`, as rustc emits them for amdgcn), as two instructions: the
/// runtime's call on the control variable (which `lower-emutls` put in that address space too), whose generic
/// pointer is then cast back to the global address space the access's users expect.
fn rewrite_global_access(line: &str, call: &str, ir: &str) -> Result<String> {
    let Some((result, _)) = line.trim_start().split_once(" = ").filter(|(result, _)| result.starts_with('%')) else {
        bail!("a thread-local access whose value is not named: `{}`", line.trim());
    };
    let at = line.find(call).expect("the caller found the call");
    let (_, control) = accessed(&line[at + call.len()..], ir)?;
    let indent = &line[..line.len() - line.trim_start().len()];
    // `%emutls.r` is a fresh name whether `%r` is named or numbered (a name starts with no digit, and a numbered
    // value's digits cannot take a suffix).
    let generic = match result[1..].strip_prefix('"') {
        Some(quoted) => format!("%\"emutls.{quoted}"),
        None => format!("%emutls.{}", &result[1..]),
    };
    Ok(format!(
        "{indent}{generic} = call ptr @{GET_ADDRESS}(ptr addrspacecast (ptr addrspace(1) {control} to ptr))\n\
         {indent}{result} = addrspacecast ptr {generic} to ptr addrspace(1)"
    ))
}

/// The thread-local that starts an access's `argument` (as written) and its control variable, which the module
/// `ir` must define.
fn accessed<'a>(argument: &'a str, ir: &str) -> Result<(&'a str, String)> {
    let Some(global) = global_name(argument) else {
        let shown = argument.split(')').next().unwrap_or(argument);
        bail!("a thread-local access through `{shown}`, which is not a named global");
    };
    let control = control_variable(global);
    if !ir.contains(&format!("{control} = ")) {
        bail!("thread-local `{global}` has no control variable `{control}` (lower-emutls did not run?)");
    }
    Ok((global, control))
}

/// Whether `line` defines or declares a control variable.
fn is_control_variable(line: &str) -> bool {
    line.starts_with(&format!("@{CONTROL_PREFIX}")) || line.starts_with(&format!("@\"{CONTROL_PREFIX}"))
}

/// A control variable's definition with the pointer to its thread-local's initial value made generic, as its field
/// is: on AMD, `lower-emutls` puts the initial value in the global address space and writes that pointer as it is
/// (`ptr addrspace(1) @__emutls_t.X`), which the assembler refuses (`element 3 of struct initializer doesn't match`).
fn generic_initial_value(line: &str) -> String {
    const GLOBAL_POINTER: &str = ", ptr addrspace(1) ";
    let mut rewritten = String::with_capacity(line.len() + 32);
    let mut rest = line;
    while let Some(at) = rest.find(GLOBAL_POINTER) {
        let after = &rest[at + GLOBAL_POINTER.len()..];
        let Some(global) = global_name(after) else {
            rewritten.push_str(&rest[..at + GLOBAL_POINTER.len()]);
            rest = after;
            continue;
        };
        rewritten.push_str(&rest[..at]);
        rewritten.push_str(&format!(", ptr addrspacecast (ptr addrspace(1) {global} to ptr)"));
        rest = &after[global.len()..];
    }
    rewritten.push_str(rest);
    rewritten
}

/// The global that starts `text` (`@name` or `@"name"`), as written.
fn global_name(text: &str) -> Option<&str> {
    let length = match text.strip_prefix("@\"") {
        Some(quoted) => quoted.find('"')? + 3,
        None if text.starts_with('@') => {
            let end = text[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '$' | '.' | '_')))
                .map_or(text.len(), |end| end + 1);
            if end == 1 {
                return None;
            }
            end
        }
        None => return None,
    };
    Some(&text[..length])
}

/// The control variable `lower-emutls` made for `global` (as written: `@name` or `@"name"`).
fn control_variable(global: &str) -> String {
    match global.strip_prefix("@\"") {
        Some(quoted) => format!("@\"{CONTROL_PREFIX}{quoted}"),
        None => format!("@{CONTROL_PREFIX}{}", &global[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `opt -passes=lower-emutls` leaves of a module with a defined and an external thread-local.
    const LOWERED: &str = r#"%0 = type { i64, i64, ptr, ptr }
@X = internal thread_local global { i64, [8 x i8] } { i64 7, [8 x i8] zeroinitializer }, align 8
@"Y.q$x" = external thread_local global i32, align 4
@__emutls_v.X = internal global %0 { i64 16, i64 8, ptr null, ptr @__emutls_t.X }, align 8
@__emutls_t.X = internal constant { i64, [8 x i8] } { i64 7, [8 x i8] zeroinitializer }, align 8
@"__emutls_v.Y.q$x" = external global %0

define ptr @f() {
  %p = call ptr @llvm.threadlocal.address.p0(ptr @X)
  %q = call align 4 ptr @llvm.threadlocal.address.p0(ptr @"Y.q$x")
  ret ptr %p
}

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare nonnull ptr @llvm.threadlocal.address.p0(ptr nonnull) #0
"#;

    #[test]
    fn accesses_become_calls_of_the_runtime_on_control_variables() {
        let rewritten = rewrite_thread_locals(LOWERED).unwrap().unwrap();
        assert!(rewritten.contains("%p = call ptr @__emutls_get_address(ptr @__emutls_v.X)\n"), "{rewritten}");
        assert!(
            rewritten.contains("%q = call align 4 ptr @__emutls_get_address(ptr @\"__emutls_v.Y.q$x\")\n"),
            "{rewritten}"
        );
        assert!(rewritten.contains("declare ptr @__emutls_get_address(ptr)\n"), "{rewritten}");
        assert!(!rewritten.contains(INTRINSIC), "{rewritten}");
        assert_eq!(rewritten.matches("declare ").count(), 1, "{rewritten}");
    }

    /// The same for AMD, where globals, thread-locals and their control variables live in address space 1.
    const LOWERED_AMD: &str = r#"%0 = type { i64, i64, ptr, ptr }
@X = internal thread_local addrspace(1) global i64 7, align 8
@__emutls_v.X = internal addrspace(1) global %0 { i64 8, i64 8, ptr null, ptr addrspace(1) @__emutls_t.X }, align 8
@__emutls_t.X = internal addrspace(1) constant i64 7, align 8

define i64 @f() {
  %3 = tail call align 8 ptr addrspace(1) @llvm.threadlocal.address.p1(ptr addrspace(1) @X)
  %v = load i64, ptr addrspace(1) %3, align 8
  ret i64 %v
}

declare nonnull ptr addrspace(1) @llvm.threadlocal.address.p1(ptr addrspace(1) nonnull) #0
"#;

    #[test]
    fn an_access_in_the_global_address_space_gets_the_runtime_s_pointer_cast_back() {
        let rewritten = rewrite_thread_locals(LOWERED_AMD).unwrap().unwrap();
        assert!(
            rewritten.contains(
                "  %emutls.3 = call ptr @__emutls_get_address(ptr addrspacecast (ptr addrspace(1) @__emutls_v.X to \
                 ptr))\n  %3 = addrspacecast ptr %emutls.3 to ptr addrspace(1)\n  %v = load"
            ),
            "{rewritten}"
        );
        assert!(rewritten.contains("declare ptr @__emutls_get_address(ptr)\n"), "{rewritten}");
        assert!(!rewritten.contains(INTRINSIC), "{rewritten}");
        assert!(
            rewritten.contains(
                "@__emutls_v.X = internal addrspace(1) global %0 { i64 8, i64 8, ptr null, ptr addrspacecast (ptr \
                 addrspace(1) @__emutls_t.X to ptr) }, align 8\n"
            ),
            "{rewritten}"
        );
        let unnamed = LOWERED_AMD.replace("  %3 = tail call", "  tail call");
        let error = rewrite_thread_locals(&unnamed).unwrap_err().to_string();
        assert!(error.starts_with("a thread-local access whose value is not named: `tail call"), "{error}");
    }

    #[test]
    fn a_module_that_defines_the_runtime_function_gets_no_second_declaration() {
        let with_runtime = format!("{LOWERED}\ndefine ptr @__emutls_get_address(ptr %0) {{\n  ret ptr %0\n}}\n");
        let rewritten = rewrite_thread_locals(&with_runtime).unwrap().unwrap();
        assert!(!rewritten.contains("declare ptr @__emutls_get_address"), "{rewritten}");
    }

    #[test]
    fn a_module_without_thread_locals_is_left_alone() {
        assert_eq!(rewrite_thread_locals("define void @f() {\n  ret void\n}\n").unwrap(), None);
        assert!(!may_have_thread_locals(b"BC\xc0\xde no intrinsic here"));
        assert!(may_have_thread_locals(b"....llvm.threadlocal.address.p0...."));
    }

    #[test]
    fn an_access_without_a_control_variable_or_global_is_an_error() {
        let unlowered = LOWERED.replace("@__emutls_v.X = ", "@other = ");
        let error = rewrite_thread_locals(&unlowered).unwrap_err().to_string();
        assert_eq!(error, "thread-local `@X` has no control variable `@__emutls_v.X` (lower-emutls did not run?)");
        let through_register = LOWERED.replace("(ptr @X)", "(ptr %r)");
        let error = rewrite_thread_locals(&through_register).unwrap_err().to_string();
        assert_eq!(error, "a thread-local access through `%r`, which is not a named global");
    }
}
