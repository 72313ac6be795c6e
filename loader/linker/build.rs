//! Records the host's target triple: the linker finds the toolchain's LLVM tools under `rustlib/<host>/bin`.

fn main() {
    println!("cargo:rustc-env=GPU_BITCODE_LINKER_HOST_TRIPLE={}", std::env::var("TARGET").unwrap());
}
