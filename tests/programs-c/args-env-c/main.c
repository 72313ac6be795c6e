/* Arguments and environment, as tests/programs/args-env checks them, from C: run with `1 2 3` and FRANCE=Paris,
   GERMANY=Berlin in the environment; every thread checks them and the results are ORed. Thread 0 of block 0 also
   prints what it saw with puts and fputs. */
#include <gpu_startup.h>
#include <gpuintrin.h>

static int equal(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static int env_has(char **envp, const char *wanted) {
    for (; *envp; envp++) {
        if (equal(*envp, wanted)) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv, char **envp) {
    int failures = 0;
    if (argc != 4) {
        failures |= 1;
    }
    if (argc == 4 && (!equal(argv[1], "1") || !equal(argv[2], "2") || !equal(argv[3], "3"))) {
        failures |= 2;
    }
    if (argv[argc] != NULL) {
        failures |= 4;
    }
    if (!env_has(envp, "FRANCE=Paris") || !env_has(envp, "GERMANY=Berlin")) {
        failures |= 8;
    }
    if (__gpu_thread_id(0) == 0 && __gpu_block_id(0) == 0) {
        fputs("args:", stdout);
        for (int i = 1; i < argc; i++) {
            fputs(" ", stdout);
            fputs(argv[i], stdout);
        }
        fputs("\n", stdout);
        puts(env_has(envp, "FRANCE=Paris") ? "FRANCE=Paris" : "FRANCE missing");
        puts(env_has(envp, "GERMANY=Berlin") ? "GERMANY=Berlin" : "GERMANY missing");
        fwrite("checked\n", 1, 8, stderr);
    }
    return failures;
}
