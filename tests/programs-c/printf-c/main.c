/* printf and its family from C. With no argument, one thread prints every kind of conversion (the expected text is
   glibc's for the same calls, except where docs/c-programs.md says this printf differs) and checks the functions'
   results; `threads` prints a line of mixed arguments from every thread, and a long one to stderr; `missing`
   passes fewer arguments than conversions; `bad-string` passes `%s` a pointer to nothing. */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* `%lc` takes a wint_t, which only <wchar.h> names; the compiler knows the type. */
typedef __WINT_TYPE__ wint_t;

/* A variadic function of the program's own that hands its arguments on as a va_list. */
static int print_with(const char *format, ...) {
    va_list args;
    va_start(args, format);
    int written = vprintf(format, args);
    va_end(args);
    return written;
}

static int print_to(FILE *stream, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int written = vfprintf(stream, format, args);
    va_end(args);
    return written;
}

static int format_into(char *buffer, size_t size, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int written = vsnprintf(buffer, size, format, args);
    va_end(args);
    return written;
}

static int format_unbounded(char *buffer, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int written = vsprintf(buffer, format, args);
    va_end(args);
    return written;
}

static int same(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++, b++;
    }
    return *a == *b;
}

static void conversions(void) {
    double infinity = __builtin_inf(), nan = __builtin_nan("");
    printf("int: [%d] [%i] [%5d] [%-5d] [%05d] [%+d] [% d] [%.3d] [%u]\n", -42, 42, 42, 42, -42, 42, 42, 7, -1);
    printf("bases: [%x] [%X] [%#x] [%#o] [%o] [%b] [%#b] [%#.0x]\n", 255, 255, 255, 8, 8, 5, 5, 0);
    printf("lengths: [%ld] [%lld] [%lu] [%zu] [%jd] [%td] [%hhd] [%hd] [%lx] [%hhu]\n", -9000000000L,
           9223372036854775807LL, 18446744073709551615UL, (size_t)123, (intmax_t)-1, (ptrdiff_t)-2, 300, 70000,
           0xdeadbeefcafeL, 257);
    printf("fixed: [%f] [%.2f] [%10.3f] [%-10.1f] [%+.1f] [%010.2f] [%#.0f] [%.0f] [%.0f]\n", 3.14159265, 2.675,
           -1.5, 1.25, 2.0, -3.5, 2.0, 0.5, 1.5);
    printf("exponent: [%e] [%.3E] [%.0e] [%e] [%e] [%.20e]\n", 123456.789, 0.000123, 5.0, 1e300, 0.0, 0.1);
    printf("general: [%g] [%G] [%g] [%g] [%g] [%#g] [%.17g] [%.3g] [%g]\n", 100000.0, 1e-10, 1000000.0, 0.0001,
           123.456, 1.0, 0.1, 1234.5, -0.0);
    printf("hex float: [%a] [%A] [%.1a] [%a] [%a]\n", 1.0, -3.0, 1.96875, 5e-324, 0.1);
    printf("subnormal: [%e] [%.17g] [%g]\n", 5e-324, 2.2250738585072014e-308, 4.9406564584124654e-324);
    printf("special: [%f] [%F] [%e] [%g] [%5.1f] [%-6f] [%+f]\n", infinity, -infinity, nan, -nan, infinity,
           nan, infinity);
    printf("text: [%c] [%3c] [%-3c] [%s] [%8s] [%-8s] [%.3s] [%s] [%.2s]\n", 'A', 'b', 'c', "str", "right", "left",
           "truncate", (char *)0, (char *)0);
    printf("pointer: [%p] [%p] [%12p]\n", (void *)0, (void *)0x1234, (void *)0xabc);
    printf("star: [%*d] [%-*d] [%.*f] [%*.*s] [%.*d]\n", 6, 42, 6, 42, 3, 3.14159, 6, 2, "abcdef", -1, 5);
    printf("mixed: %d %ld %f %p %c %s %u %e %lld %g %x\n", 1, -2L, 3.5, (void *)0x40, 'z', "six", 7u, 8e-8, -9LL,
           10.5, 11);
    printf("percent: 100%% [%5%]\n");
    printf("wide: [%lc] [%ls] [%.3ls]\n", (wint_t)0xe9, L"h\xe9\x4e2d", L"h\xe9\x4e2d");
    printf("long: %0300d|\n", 7);
    printf("huge: %.1100f|%.800e|%.30a\n", 5e-324, 1.0 / 3.0, 0.1);
}

static void results(void) {
    char buffer[64];
    int n = snprintf(buffer, sizeof buffer, "%s-%04d", "id", 42);
    printf("snprintf: %d [%s]\n", n, buffer);
    n = snprintf(buffer, 8, "%s", "0123456789abc");
    printf("snprintf truncated: %d [%s]\n", n, buffer);
    n = snprintf((char *)0, 0, "%d", 123456);
    printf("snprintf measuring: %d\n", n);
    n = sprintf(buffer, "%x|%o|%.3e", 255, 8, 1234.5);
    printf("sprintf: %d [%s]\n", n, buffer);
    n = format_into(buffer, 6, "%.2f%%", 99.5);
    printf("vsnprintf: %d [%s]\n", n, buffer);
    n = format_unbounded(buffer, "<%5s|%-5d>", "ab", 12);
    printf("vsprintf: %d [%s] %s\n", n, buffer, same(buffer, "<   ab|12   >") ? "same" : "DIFFERENT");
    n = print_with("vprintf: %d %s %.1f %c %ld\n", 7, "seven", 7.0, '7', 7L);
    printf("vprintf returned %d\n", n);
    n = fprintf(stderr, "fprintf to stderr: %d\n", 2);
    printf("fprintf(stderr) returned %d\n", n);
    n = print_to(stderr, "vfprintf to stderr: %s\n", "yes");
    printf("vfprintf(stderr) returned %d\n", n);
    n = fprintf(stdout, "fprintf to stdout: %d\n", 1);
    printf("fprintf(stdout) returned %d\n", n);
    n = fprintf((FILE *)buffer, "nowhere %d\n", 3);
    printf("fprintf(unknown stream) returned %d\n", n);
    n = printf("%s", "");
    printf("empty printf returned %d\n", n);
}

/* The bad input that docs/c-programs.md describes; the formats go through a function without the format
   attribute, as they would come from data. */
static void refusals(void) {
    int target = 77;
    int n = print_with("count %n|\n", &target);
    printf("\n%%n returned %d, target %d\n", n, target);
    n = print_with("unknown: [%y] [%hhy] [%-5k]\n");
    printf("unknown returned %d\n", n);
    n = print_with("positional %1$d\n", 5);
    printf("\npositional returned %d\n", n);
    n = print_with("incomplete %5");
    printf("\nincomplete returned %d\n", n);
    n = print_with("wide %lc|\n", (wint_t)0xd800);
    printf("\nsurrogate returned %d\n", n);
    n = print_with("%2147483648d\n", 1);
    printf("width over INT_MAX returned %d\n", n);
}

int main(int argc, char **argv, char **envp) {
    (void)envp;
    const char *mode = argc > 1 ? argv[1] : "";
    if (same(mode, "threads")) {
        unsigned thread = __gpu_thread_id(0), block = __gpu_block_id(0);
        printf("thread %u of block %u: %d %ld %.3f %s %c %#x %e\n", thread, block, -(int)thread,
               (long)block * 1000000000000L, thread / 8.0, thread % 2 ? "odd" : "even", 'a' + (int)(thread % 26),
               thread * block, (double)(thread + 1) * 1e-20);
        /* Two chunks and a bit: the host keeps the pieces of each thread's line together. */
        int length = snprintf((char *)0, 0, "%u/%u %0600d\n", block, thread, 0);
        return fprintf(stderr, "%u/%u %0600d\n", block, thread, 0) == length ? 0 : 1;
    }
    if (same(mode, "missing")) {
        /* Two conversions without arguments: C leaves this undefined; here they print what the caller's argument
           buffer holds next. */
        return print_with("%d %d %d\n", 1) > 0 ? 0 : 1;
    }
    if (same(mode, "bad-string")) {
        puts("before the bad string");
        return printf("%s\n", (const char *)16);
    }
    conversions();
    results();
    refusals();
    return 0;
}
