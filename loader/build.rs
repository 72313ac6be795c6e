//! The loader's build script: it tells the bitcode linker the host's target triple, under which the toolchain
//! keeps its LLVM tools.

fn main() {
    // The bitcode linker finds the toolchain's LLVM tools under `rustlib/<host>/bin`.
    println!("cargo:rustc-env=GPU_LOADER_HOST_TRIPLE={}", std::env::var("TARGET").unwrap());
}
