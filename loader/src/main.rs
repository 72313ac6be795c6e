//! `gpu-loader [OPTIONS] IMAGE [ARGS]...`: runs a GPU program like an ordinary program (`gpu_loader::cli`).

fn main() {
    gpu_loader::cli::main(gpu_loader::HostCalls::new())
}
