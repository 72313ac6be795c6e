/* Pointers that free and realloc must refuse, by argv[1]: `double` (a block freed twice), `interior` (a pointer into
   the middle of a block), `outside` (a pointer to the stack), `realloc` (realloc of an interior pointer). Each ends
   the program with a message naming the call and the pointer on stderr, and the loader exits with 134 (as for
   abort); the line on stdout before it must still arrive. (heap-bad-free does the same through Rust's deallocation.) */
#include <gpu_startup.h>

static int same(const char *a, const char *b) {
    while (*a && *a == *b)
        ++a, ++b;
    return *a == *b;
}

int main(int argc, char **argv, char **envp) {
    (void)envp;
    if (argc < 2) {
        puts("usage: heap-bad-free-c double | interior | outside | realloc");
        return 2;
    }
    char *block = malloc(100);
    if (same(argv[1], "double")) {
        free(block);
        printf("freeing %p a second time\n", (void *)block);
        free(block);
    } else if (same(argv[1], "interior")) {
        printf("freeing %p, 16 bytes into a block\n", (void *)(block + 16));
        free(block + 16);
    } else if (same(argv[1], "outside")) {
        char local[100];
        puts("freeing a pointer to the stack");
        free(local);
    } else if (same(argv[1], "realloc")) {
        printf("reallocating %p, 8 bytes into a block\n", (void *)(block + 8));
        realloc(block + 8, 200);
    } else {
        puts("usage: heap-bad-free-c double | interior | outside | realloc");
        return 2;
    }
    puts("the heap took it");
    return 1;
}
