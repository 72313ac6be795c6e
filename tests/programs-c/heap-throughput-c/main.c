/* The allocation benchmark's program (gpu-bench's `heap-throughput`, run small in the suite): every thread allocates
   and frees ROUNDS blocks (argv[1], default 1,000) with malloc and free, one at a time, writing the first and last
   byte of each and reading them back. The sizes, 16 to 256 bytes, come from a hash of the thread's index and the
   round: the same as in the CUDA baseline's kernel (tests/src/bench/heap.rs). A NULL or a wrong byte makes the
   thread say how many on stderr and return 1. */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <stdint.h>

/* The decimal number `text` holds, or `otherwise` when it holds something else. */
static uint32_t parse(const char *text, uint32_t otherwise) {
    uint32_t value = 0;
    if (*text == '\0')
        return otherwise;
    for (; *text; ++text) {
        if (*text < '0' || *text > '9')
            return otherwise;
        value = value * 10 + (uint32_t)(*text - '0');
    }
    return value;
}

/* The size of thread `thread`'s block in round `round`: 16 to 256 bytes. The baseline's PTX computes the same. */
static size_t block_size(uint32_t thread, uint32_t round) {
    uint32_t x = thread * 0x9e3779b9u + round * 0x85ebca6bu;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return 16 + x % 241;
}

int main(int argc, char **argv, char **envp) {
    (void)envp;
    uint32_t rounds = argc > 1 ? parse(argv[1], 1000) : 1000;
    uint32_t thread = __gpu_block_id(0) * __gpu_num_threads(0) + __gpu_thread_id(0);
    uint32_t failed = 0, wrong = 0;
    for (uint32_t round = 0; round < rounds; ++round) {
        size_t size = block_size(thread, round);
        volatile uint8_t *block = malloc(size);
        if (!block) {
            ++failed;
            continue;
        }
        block[0] = (uint8_t)round;
        block[size - 1] = (uint8_t)thread;
        if (block[0] != (uint8_t)round || block[size - 1] != (uint8_t)thread)
            ++wrong;
        free((void *)block);
    }
    if (failed + wrong > 0) {
        fprintf(stderr, "thread %u: %u of %u allocations failed, %u blocks lost their bytes\n", thread, failed, rounds,
                wrong);
        return 1;
    }
    return 0;
}
