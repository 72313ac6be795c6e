/* Many threads printing at once from C: every thread writes one line to stderr with fputs and one to stdout with
   puts. Each line must arrive whole, never cut or interleaved with another thread's. */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <stdint.h>

/* Appends the decimal digits of `value` at `out`; returns the end. */
static char *append_number(char *out, uint32_t value) {
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (n > 0) {
        *out++ = digits[--n];
    }
    return out;
}

static char *append(char *out, const char *text) {
    while (*text) {
        *out++ = *text++;
    }
    return out;
}

int main(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    char line[64];
    char *end = append(line, "thread ");
    end = append_number(end, __gpu_thread_id(0));
    end = append(end, " of block ");
    end = append_number(end, __gpu_block_id(0));
    end[0] = '\0';
    puts(line);
    end[0] = '\n';
    end[1] = '\0';
    return fputs(line, stderr) == 0 && fputs(line, (FILE *)line) == -1 ? 0 : 1;
}
