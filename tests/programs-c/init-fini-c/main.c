/* Constructors by priority, main, then atexit handlers (latest first) before destructors (highest priority first),
   as tests/programs/init-fini checks in Rust, with C's __attribute__((constructor(N))) and destructor(N). */
#include <gpu_startup.h>

static unsigned constructed;

static void registered_by_constructor(void) { puts("atexit from constructor"); }
static void registered_by_main(void) { puts("atexit from main"); }

/* Defined out of order on purpose: the priority decides. */
__attribute__((constructor)) static void last(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    puts("constructor default");
    constructed = constructed * 10 + 3;
}

GPU_CONSTRUCTOR(200, second) {
    (void)argc, (void)argv, (void)envp;
    puts("constructor 200");
    constructed = constructed * 10 + 2;
}

__attribute__((constructor(101))) static void first(int argc, char **argv, char **envp) {
    (void)argv, (void)envp;
    /* No printf: format the one digit by hand. */
    char line[] = "constructor 101 (argc ?)";
    line[sizeof line - 3] = (char)('0' + argc % 10);
    puts(line);
    constructed = constructed * 10 + 1;
    atexit(registered_by_constructor);
}

__attribute__((destructor(101))) static void destructor_low(void) { puts("destructor 101"); }
GPU_DESTRUCTOR(300, destructor_high) { puts("destructor 300"); }

int main(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    char line[] = "main sees ???";
    unsigned value = constructed;
    for (int i = 0; i < 3; i++) {
        line[sizeof line - 2 - i] = (char)('0' + value % 10);
        value /= 10;
    }
    puts(line);
    atexit(registered_by_main);
    return constructed == 123 ? 0 : 1;
}
