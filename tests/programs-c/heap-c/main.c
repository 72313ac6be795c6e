/* The heap from C, on every thread of the grid at once: malloc, calloc, realloc, aligned_alloc, posix_memalign and
   free, each block filled with a pattern of its thread's and checked. A thread that finds something wrong writes
   what to stderr and returns 1. Thread 0 of block 0 then writes one line, built in a malloc'd buffer. */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <stdint.h>

static uint8_t pattern(uint32_t thread, size_t i) { return (uint8_t)(thread * 31u + i * 7u); }

static void fill(uint8_t *block, size_t len, uint32_t thread) {
    for (size_t i = 0; i < len; ++i)
        block[i] = pattern(thread, i);
}

static int holds(const uint8_t *block, size_t len, uint32_t thread) {
    for (size_t i = 0; i < len; ++i)
        if (block[i] != pattern(thread, i))
            return 0;
    return 1;
}

static char *append(char *out, const char *text) {
    while (*text)
        *out++ = *text++;
    return out;
}

/* Writes "thread T: WHAT" to stderr and returns 1. */
static int wrong(uint32_t thread, const char *what) {
    char line[128];
    char digits[10];
    int n = 0;
    do
        digits[n++] = (char)('0' + thread % 10);
    while ((thread /= 10) != 0);
    char *end = append(line, "thread ");
    while (n > 0)
        *end++ = digits[--n];
    end = append(end, ": ");
    end = append(end, what);
    end = append(end, "\n");
    *end = '\0';
    fputs(line, stderr);
    return 1;
}

int main(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    uint32_t thread = __gpu_block_id(0) * __gpu_num_threads(0) + __gpu_thread_id(0);
    size_t size = 1 + thread * 13 % 3000;

    uint8_t *block = malloc(size);
    if (!block || (uintptr_t)block % 16 != 0)
        return wrong(thread, "malloc");
    fill(block, size, thread);

    uint32_t *zeroed = calloc(100 + thread % 50, sizeof(uint32_t));
    if (!zeroed)
        return wrong(thread, "calloc returned NULL");
    for (size_t i = 0; i < 100 + thread % 50; ++i)
        if (zeroed[i] != 0)
            return wrong(thread, "calloc's block is not zeroed");

    /* Growing moves the contents (to a run of pages for the largest); shrinking keeps what fits. */
    uint8_t *grown = realloc(block, size + 10000);
    if (!grown || !holds(grown, size, thread))
        return wrong(thread, "realloc lost the contents growing");
    uint8_t *shrunk = realloc(grown, size / 2 + 1);
    if (!shrunk || !holds(shrunk, size / 2 + 1, thread))
        return wrong(thread, "realloc lost the contents shrinking");

    size_t alignment = (size_t)64 << (thread % 7); /* 64 to 4096 */
    uint8_t *aligned = aligned_alloc(alignment, 200);
    if (!aligned || (uintptr_t)aligned % alignment != 0)
        return wrong(thread, "aligned_alloc");
    fill(aligned, 200, thread + 1);

    void *memaligned = NULL;
    if (posix_memalign(&memaligned, 256, 1000) != 0 || (uintptr_t)memaligned % 256 != 0)
        return wrong(thread, "posix_memalign");
    void *untouched = &thread;
    if (posix_memalign(&untouched, 24, 8) != 22 || untouched != &thread)
        return wrong(thread, "posix_memalign took an alignment that is not a power of two");
    if (aligned_alloc(3, 8) != NULL)
        return wrong(thread, "aligned_alloc took an alignment that is not a power of two");

    void *nothing = malloc(0);
    if (!nothing)
        return wrong(thread, "malloc(0) returned NULL");
    if (malloc((size_t)-1) != NULL || calloc((size_t)1 << 40, (size_t)1 << 40) != NULL)
        return wrong(thread, "an impossible size did not give NULL");
    if (realloc(malloc(40), 0) != NULL)
        return wrong(thread, "realloc(p, 0) did not free");

    if (!holds(shrunk, size / 2 + 1, thread) || !holds(aligned, 200, thread + 1))
        return wrong(thread, "a block changed while the thread made others");
    free(shrunk);
    free(zeroed);
    free(aligned);
    free(memaligned);
    free(nothing);
    free(NULL);

    if (thread == 0) {
        char *line = realloc(NULL, 80);
        if (!line)
            return wrong(thread, "realloc(NULL, n)");
        *append(line, "malloc, calloc, realloc, aligned_alloc, posix_memalign, free") = '\0';
        puts(line);
        free(line);
    }
    return 0;
}
