/* Files, stdin, getenv and errno from C, through the FILE streams of gpu_startup.h.

   Without arguments: every thread writes a file of its own with fprintf, reads it back with fgets and removes it,
   and appends a long line (over a chunk of formatted output) to one log that a constructor opened; the destructor
   reads the log back and checks that every thread's line is there once, whole. Before that, a constructor goes
   through the functions and their errors: a missing file, a directory, a bad mode, a closed stream, the standard
   streams used the wrong way, fseek/ftell/rewind/feof/ferror/clearerr, fread/fwrite/fgetc/fputc, remove, rename,
   getenv, perror. (On one thread: with other threads opening and closing files, a `FILE *` kept after `fclose` may
   name another thread's file by then, as in any C library.)
   `stdin`: each thread reads one line of the loader's stdin with fgets and prints it. `getchar`: thread 0 counts the
   bytes and lines of stdin with getchar. */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <stdint.h>

static FILE *log_file;
static uint64_t threads_in_main;

/* The padding of each log line: longer than the 256 bytes of one chunk of formatted output. */
#define PADDING                                                                                                    \
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"  \
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"  \
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"

static int same(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++, b++;
    }
    return *a == *b;
}

static const char *mode(int argc, char **argv) {
    return argc > 1 ? argv[1] : "files";
}

GPU_CONSTRUCTOR(101, open_log) {
    (void)envp;
    if (same(mode(argc, argv), "files")) {
        log_file = fopen("log.txt", "w");
        if (!log_file) {
            perror("log.txt");
        }
    }
}

GPU_DESTRUCTOR(101, check_log) {
    if (!log_file) {
        return;
    }
    if (fclose(log_file) != 0) {
        perror("closing the log");
        return;
    }
    FILE *log = fopen("log.txt", "r");
    if (!log) {
        perror("reopening the log");
        return;
    }
    uint64_t seen[4] = {0, 0, 0, 0};
    int lines = 0, whole = 1;
    char line[512];
    while (fgets(line, sizeof line, log)) {
        lines++;
        char expected[512];
        unsigned index = 0;
        const char *digits = line + 7;
        while (*digits >= '0' && *digits <= '9') {
            index = index * 10 + (unsigned)(*digits++ - '0');
        }
        snprintf(expected, sizeof expected, "thread %u: %s\n", index, PADDING);
        if (!same(line, expected) || index >= threads_in_main || (seen[index / 64] >> (index % 64) & 1)) {
            printf("log: a bad line: %s", line);
            whole = 0;
            continue;
        }
        seen[index / 64] |= (uint64_t)1 << (index % 64);
    }
    printf("log: %d lines of %d threads, each whole, each thread once: %s; feof %d ferror %d\n", lines,
           (int)threads_in_main, whole && (uint64_t)lines == threads_in_main ? "true" : "false", feof(log) != 0,
           ferror(log) != 0);
    fclose(log);
}

/* Every thread: a file of its own, written, read back and removed; then its line in the log. A failed step says
   which it was, errno, and what was read. */
static int own_file_and_log(unsigned index) {
    char name[32], expected[64], line[64] = "", more[64] = "";
    snprintf(name, sizeof name, "c-thread-%u.txt", index);
    FILE *file = fopen(name, "w");
    if (!file || fprintf(file, "thread %u was here\n", index) < 0 || fclose(file) != 0) {
        perror(name);
        return 1;
    }
    snprintf(expected, sizeof expected, "thread %u was here\n", index);
    const char *step = 0;
    file = fopen(name, "r");
    if (!file) {
        step = "fopen";
    } else if (!fgets(line, sizeof line, file)) {
        step = "the first fgets";
    } else if (!same(line, expected)) {
        step = "the line's text";
    } else if (fgets(more, sizeof more, file)) {
        step = "the second fgets (it read more)";
    } else if (!feof(file)) {
        step = "feof after the last line";
    }
    if (file && fclose(file) != 0 && !step) {
        step = "fclose";
    }
    if (!step && remove(name) != 0) {
        step = "remove";
    }
    if (step) {
        printf("thread %u: reading back %s failed at %s: %s; read \"%s\", then \"%s\"\n", index, name, step,
               strerror(errno), line, more);
        return 1;
    }
    return fprintf(log_file, "thread %u: %s\n", index, PADDING) < 0;
}

/* Prints `what`, the result and errno's name and message. */
static void report(const char *what, long result) {
    int error = errno;
    printf("%s: %ld, errno %d (%s)\n", what, result, error, strerror(error));
    errno = 0;
}

/* The functions and their errors, each on a line. */
GPU_CONSTRUCTOR(102, operations) {
    (void)envp;
    if (!same(mode(argc, argv), "files")) {
        return;
    }
    errno = 0;
    report("fopen of a missing file", fopen("missing.txt", "r") != NULL);
    report("fopen of a directory", fopen(".", "r") != NULL);
    report("fopen of a directory for writing", fopen(".", "w") != NULL);
    report("fopen with mode \"rw\"", fopen("data.txt", "rw") != NULL);

    FILE *data = fopen("data.txt", "w+");
    report("fopen(\"data.txt\", \"w+\")", data != NULL);
    report("fputs", fputs("0123", data));
    report("fputc", fputc('4', data));
    report("fwrite", (long)fwrite("56789", 1, 5, data));
    report("fprintf", fprintf(data, "|%d|%s", 42, "end"));
    report("ftell", ftell(data));
    report("fseek to 3", fseek(data, 3, SEEK_SET));
    report("fgetc", fgetc(data));
    char buffer[32] = {0};
    report("fread 4 of 2 bytes", (long)fread(buffer, 2, 4, data));
    printf("  read: %s\n", buffer);
    report("fseek to 2 before the end", fseek(data, -2, SEEK_END));
    report("fread past the end", (long)fread(buffer, 1, 10, data));
    report("feof", feof(data) != 0);
    report("fgetc at the end", fgetc(data));
    clearerr(data);
    report("feof after clearerr", feof(data));
    report("fseek with a bad origin", fseek(data, 0, 99));
    report("fseek before the start", fseek(data, -1, SEEK_SET));
    rewind(data);
    report("fgets after rewind", fgets(buffer, sizeof buffer, data) == buffer);
    printf("  line: %s\n", buffer);
    report("fflush", fflush(data));
    report("fclose", fclose(data));
    report("fclose again", fclose(data));
    report("fputs to a closed stream", fputs("late", data));
    report("fgetc from a closed stream", fgetc(data));
    report("ftell of a closed stream", ftell(data));
    report("fprintf to a closed stream", fprintf(data, "%d", 1));
    report("fputc to no stream", fputc('x', (FILE *)buffer));
    report("fflush(NULL)", fflush(NULL));

    report("fgetc from stdout", fgetc(stdout));
    report("ferror(stdout)", ferror(stdout));
    clearerr(stdout);
    report("fputc to stdin", fputc('x', stdin));
    report("fseek on stdin", fseek(stdin, 0, SEEK_SET));
    report("ftell of stderr", ftell(stderr));
    report("getchar on an empty stdin", getchar());
    report("feof(stdin)", feof(stdin) != 0);
    clearerr(stdin);

    FILE *reader = fopen("data.txt", "r");
    report("fputs to a stream opened for reading", fputs("x", reader));
    report("ferror", ferror(reader));
    fclose(reader);
    FILE *appender = fopen("data.txt", "a");
    fprintf(appender, "+%s", "more");
    fclose(appender);
    reader = fopen("data.txt", "rb");
    report("fread of all", (long)fread(buffer, 1, sizeof buffer - 1, reader));
    printf("  all: %.*s\n", 22, buffer);
    fclose(reader);
    report("fopen(\"data.txt\", \"wx\")", fopen("data.txt", "wx") != NULL);

    report("rename", rename("data.txt", "renamed.txt"));
    report("fopen of the old name", fopen("data.txt", "r") != NULL);
    report("remove", remove("renamed.txt"));
    report("remove again", remove("renamed.txt"));
    report("rename of a missing file", rename("missing.txt", "x.txt"));

    const char *greeting = getenv("FILES_C_GREETING");
    printf("getenv(\"FILES_C_GREETING\"): %s\n", greeting ? greeting : "(null)");
    printf("getenv(\"FILES_C_MISSING\"): %s\n", getenv("FILES_C_MISSING") ? "set" : "(null)");
    printf("getenv(\"FILES_C_GREETING=\"): %s\n", getenv("FILES_C_GREETING=") ? "set" : "(null)");
    errno = ENOENT;
    perror("perror");
    errno = 4242;
    perror(NULL);
}

int main(int argc, char **argv, char **envp) {
    (void)envp;
    unsigned index = __gpu_block_id(0) * __gpu_num_threads(0) + __gpu_thread_id(0);
    const char *how = mode(argc, argv);
    if (same(how, "files")) {
        if (index == 0) {
            threads_in_main = (uint64_t)__gpu_num_blocks(0) * __gpu_num_threads(0);
        }
        return own_file_and_log(index);
    }
    if (same(how, "stdin")) {
        char line[256];
        if (fgets(line, sizeof line, stdin)) {
            printf("got: %s", line);
        }
        return ferror(stdin) != 0;
    }
    if (same(how, "getchar") && index == 0) {
        long bytes = 0, lines = 0;
        int c;
        while ((c = getchar()) != EOF) {
            bytes++;
            lines += c == '\n';
        }
        printf("stdin: %ld bytes, %ld lines, feof %d, ferror %d\n", bytes, lines, feof(stdin) != 0, ferror(stdin) != 0);
    }
    return 0;
}
