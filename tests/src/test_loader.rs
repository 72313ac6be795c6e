//! `gpu-test-loader`: `gpu-loader` with the test operations and the suite's example host calls registered
//! (`startup_common::rpc::testing`), for the GPU test programs that use them (`test-operations = true` in their
//! `expect.toml`) and the benchmarks. It is what a program embedding the loader with host calls of its own looks like:
//! `gpu_loader::cli::main` with its table.

fn main() {
    gpu_loader::cli::main(startup_common::rpc::testing::operations())
}
