fn main() {
    // The bitcode linker finds the toolchain's LLVM tools under `rustlib/<host>/bin`.
    println!("cargo:rustc-env=GPU_LOADER_HOST_TRIPLE={}", std::env::var("TARGET").unwrap());
}
