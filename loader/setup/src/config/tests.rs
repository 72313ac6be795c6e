//! The merge of a crate's config: fresh files, the user's lines kept, contradictions refused, std setups.

use super::*;
use gpu_startup_targets::{AMDGPU, NVPTX};

fn plan() -> Plan {
    Plan { default_target: &NVPTX, archs: ["sm_90".into(), "gfx90a".into()], replace_arch: [false, false] }
}

fn merged(text: &str, plan: &Plan) -> Result<String> {
    Config::parse(text, ".cargo/config.toml")?.merge(plan)
}

const FRESH: &str = r#"# The GPU build of this crate, written by `cargo gpu-startup init` (run it again to update it: it keeps
# what else you write here). docs/your-own-crate.md in the gpu-startup repository says what each line is for.

# builds for the GPU target by default
[build]
target = ".cargo/nvptx64-gpu-startup.json"

# the nightly cargo features GPU builds use
[unstable]
build-std = ["core", "alloc"]
build-std-features = ["compiler-builtins-mem"]
json-target-spec = true
panic-abort-tests = true

# NVIDIA: PTX through gpu-bitcode-linker; `cargo run` runs it with gpu-loader
[target.nvptx64-gpu-startup]
linker = "gpu-bitcode-linker"
runner = "gpu-loader"
rustflags = ["-Ctarget-cpu=sm_90"]

# AMD: code objects through rust-lld (`--target .cargo/amdgcn-gpu-startup.json`)
[target.amdgcn-gpu-startup]
runner = "gpu-loader"
rustflags = ["-Ctarget-cpu=gfx90a"]

# the GPU cannot unwind; amdgpu builds fail with incremental compilation; debug info only bloats images
[profile.dev]
panic = "abort"
incremental = false
debug = false

[profile.release]
panic = "abort"
"#;

#[test]
fn a_fresh_config_has_every_line_and_a_second_merge_changes_nothing() {
    let text = merged("", &plan()).unwrap();
    assert_eq!(text, FRESH);
    assert_eq!(merged(&text, &plan()).unwrap(), text);
    let config = Config::parse(&text, "x").unwrap();
    assert_eq!(config.default_target(), Some(&NVPTX));
    assert_eq!(config.arch(&AMDGPU).as_deref(), Some("gfx90a"));
}

#[test]
fn the_users_own_lines_and_choices_stay() {
    let existing = "# my settings\n[alias]\nb = \"build\"\n\n[target.nvptx64-gpu-startup]\nrunner = \"gpu-loader \
                    --threads 256\" # wide\nrustflags = [\"-Ctarget-cpu=sm_80\", \"-Cdebug-assertions\"]\n\n\
                    [profile.dev]\ndebug = true\n";
    let text = merged(existing, &plan()).unwrap();
    assert!(text.starts_with("# my settings\n[alias]\nb = \"build\"\n"), "{text}");
    assert!(text.contains("runner = \"gpu-loader --threads 256\" # wide\n"), "{text}");
    assert!(text.contains("rustflags = [\"-Ctarget-cpu=sm_80\", \"-Cdebug-assertions\"]"), "{text}");
    assert!(text.contains("linker = \"gpu-bitcode-linker\""), "{text}");
    assert!(text.contains("debug = true"), "{text}");
    assert_eq!(merged(&text, &plan()).unwrap(), text);
}

#[test]
fn an_architecture_given_on_the_command_line_replaces_the_old_one() {
    let text = merged("", &plan()).unwrap();
    let replace = Plan { archs: ["sm_80".into(), "gfx942".into()], replace_arch: [true, false], ..plan() };
    let text = merged(&text, &replace).unwrap();
    let config = Config::parse(&text, "x").unwrap();
    assert_eq!(config.arch(&NVPTX).as_deref(), Some("sm_80"));
    assert_eq!(config.arch(&AMDGPU).as_deref(), Some("gfx90a"));
}

#[test]
fn switching_the_default_target_is_allowed() {
    let text = merged("", &plan()).unwrap();
    let text = merged(&text, &Plan { default_target: &AMDGPU, ..plan() }).unwrap();
    assert!(text.contains("target = \".cargo/amdgcn-gpu-startup.json\""), "{text}");
    assert_eq!(Config::parse(&text, "x").unwrap().default_target(), Some(&AMDGPU));
}

#[test]
fn lists_and_inline_tables_are_merged() {
    let existing =
        "build = { jobs = 2 }\n[unstable]\nbuild-std = [\"core\", \"alloc\"]\nbuild-std-features = [\"x\"]\n";
    let text = merged(existing, &plan()).unwrap();
    assert!(text.contains("[build]\njobs = 2\ntarget = \".cargo/nvptx64-gpu-startup.json\"\n"), "{text}");
    assert!(text.contains("build-std = [\"core\", \"alloc\"]"), "{text}");
    assert!(text.contains("build-std-features = [\"x\", \"compiler-builtins-mem\"]"), "{text}");
}

#[test]
fn contradictions_are_refused_naming_the_line() {
    for (existing, message) in [
        (
            "[build]\ntarget = \"thumbv7em-none-eabihf\"\n",
            "sets `build.target = \"thumbv7em-none-eabihf\"`, but a GPU build needs \".cargo/nvptx64-gpu-startup.json\"",
        ),
        (
            "[profile.dev]\npanic = \"unwind\"\n",
            "sets `profile.dev.panic = \"unwind\"`, but a GPU build needs \"abort\"",
        ),
        ("[profile.release]\npanic = \"unwind\"\n", "sets `profile.release.panic = \"unwind\"`"),
        ("[profile.dev]\nincremental = true\n", "sets `profile.dev.incremental = true`, but a GPU build needs false"),
        (
            "[unstable]\njson-target-spec = false\n",
            "sets `unstable.json-target-spec = false`, but a GPU build needs true",
        ),
        (
            "[unstable]\nbuild-std = \"core\"\n",
            "sets `unstable.build-std = \"core\"`, but a GPU build needs a list with \"core\"",
        ),
        ("build = 3\n", "`build` is not a table"),
        (
            "[target.nvptx64-gpu-startup]\nrustflags = \"-Ctarget-cpu=sm_90\"\n",
            "`target.nvptx64-gpu-startup.rustflags` is not a list",
        ),
    ] {
        let error = merged(existing, &plan()).unwrap_err().to_string();
        assert!(error.starts_with(".cargo/config.toml"), "{error}");
        assert!(error.contains(message), "{existing}: {error}");
        assert!(!error.contains('\n'), "{error}");
    }
    let error = merged("[build", &plan()).unwrap_err().to_string();
    assert!(error.starts_with(".cargo/config.toml is not valid TOML: "), "{error}");
    assert!(!error.contains('\n'), "{error}");
}

fn merged_std(text: &str, arch: &str, replace_arch: bool, sysroot: &str) -> Result<String> {
    Config::parse(text, ".cargo/config.toml")?.merge_std(&NVPTX, arch, replace_arch, Path::new(sysroot))
}

const FRESH_STD: &str = r#"# The GPU build of this crate with Rust's std, written by `cargo gpu-startup init --std` (run it again to
# update it: it keeps what else you write here). docs/std.md in the gpu-startup repository says what each
# line is for.

# builds for the GPU target with std by default
[build]
target = ".cargo/nvptx64-gpu-startup-std.json"

# the nightly cargo features GPU builds use
[unstable]
json-target-spec = true
panic-abort-tests = true

# NVIDIA with std: PTX through gpu-bitcode-linker, std from the sysroot `init --std` built; `cargo run` runs it with gpu-loader
[target.nvptx64-gpu-startup-std]
linker = "gpu-bitcode-linker"
runner = "gpu-loader"
rustflags = ["--sysroot", "/cache/std-1/sysroot", "-Ctarget-cpu=sm_90"]
rustdocflags = ["--sysroot", "/cache/std-1/sysroot", "-Ctarget-cpu=sm_90", "-Zunstable-options", "--merge-doctests=no"]

# the GPU cannot unwind; amdgpu builds fail with incremental compilation; debug info only bloats images
[profile.dev]
panic = "abort"
incremental = false
debug = false

[profile.release]
panic = "abort"
"#;

#[test]
fn a_fresh_std_config_has_every_line_and_follows_the_sysroot_and_the_architecture() {
    let text = merged_std("", "sm_90", false, "/cache/std-1/sysroot").unwrap();
    assert_eq!(text, FRESH_STD);
    assert_eq!(merged_std(&text, "sm_90", false, "/cache/std-1/sysroot").unwrap(), text);
    // A new toolchain or patch set is a new sysroot: the path follows; the architecture only when asked.
    let text = merged_std(&text, "sm_80", false, "/cache/std-2/sysroot").unwrap();
    assert!(text.contains(r#"rustflags = ["--sysroot", "/cache/std-2/sysroot", "-Ctarget-cpu=sm_90"]"#), "{text}");
    let text = merged_std(&text, "sm_80", true, "/cache/std-2/sysroot").unwrap();
    assert!(text.contains(r#"rustflags = ["--sysroot", "/cache/std-2/sysroot", "-Ctarget-cpu=sm_80"]"#), "{text}");
    assert!(
        text.contains(
            r#"rustdocflags = ["--sysroot", "/cache/std-2/sysroot", "-Ctarget-cpu=sm_80", "-Zunstable-options", "--merge-doctests=no"]"#
        ),
        "{text}"
    );
}

#[test]
fn a_no_std_setup_becomes_a_std_one_only_without_build_std() {
    let no_std = merged("", &plan()).unwrap();
    let error = merged_std(&no_std, "sm_90", false, "/s").unwrap_err().to_string();
    assert!(
        error.contains(
            "sets `unstable.build-std = [\"core\", \"alloc\"]`, but a std GPU build needs std from its sysroot"
        ),
        "{error}"
    );
    let without =
        no_std.replace("build-std = [\"core\", \"alloc\"]\nbuild-std-features = [\"compiler-builtins-mem\"]\n", "");
    let text = merged_std(&without, "sm_90", false, "/s").unwrap();
    assert!(text.contains("target = \".cargo/nvptx64-gpu-startup-std.json\""), "{text}");
    let error = merged_std("[build]\ntarget = \"x86_64-unknown-linux-gnu\"\n", "sm_90", false, "/s").unwrap_err();
    assert!(error.to_string().contains("but a std GPU build needs \".cargo/nvptx64-gpu-startup-std.json\""), "{error}");
}

#[test]
fn an_amd_std_config_names_the_amd_std_spec_and_architecture() {
    let text = Config::parse("", ".cargo/config.toml")
        .unwrap()
        .merge_std(&AMDGPU, "gfx942", false, Path::new("/cache/std-a/sysroot"))
        .unwrap();
    assert!(text.contains("target = \".cargo/amdgcn-gpu-startup-std.json\"\n"), "{text}");
    assert!(text.contains("# AMD with std: code objects through gpu-bitcode-linker"), "{text}");
    assert!(text.contains("[target.amdgcn-gpu-startup-std]\nlinker = \"gpu-bitcode-linker\"\n"), "{text}");
    assert!(text.contains(r#"rustflags = ["--sysroot", "/cache/std-a/sysroot", "-Ctarget-cpu=gfx942"]"#), "{text}");
    let config = Config::parse(&text, ".cargo/config.toml").unwrap();
    assert_eq!(config.default_target(), Some(&AMDGPU));
}
