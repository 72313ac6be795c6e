/* One line per thread with C's printf, the text `print-flood` prints with println! and the benchmark's vprintf
   comparator with CUDA's printf: the printf row of `cargo xtask bench`. */
#include <gpu_startup.h>
#include <gpuintrin.h>

int main(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    unsigned thread = __gpu_thread_id(0), block = __gpu_block_id(0);
    printf("line %u from thread %u of block %u\n", block * __gpu_num_threads(0) + thread, thread, block);
    return 0;
}
