/*
 * gpu_startup.h: what the GPU startup gives a C program.
 *
 * A GPU program is an ordinary C program: it defines `int main(int argc, char **argv, char **envp)`, which every
 * thread of the launch grid calls, and `gpu-loader IMAGE [ARGS...]` runs it. There is no libc: a program gets exactly
 * what this header declares, all defined by the startup (crates `startup-nvptx` / `startup-amdgpu`). There is no
 * `<stdio.h>`, `<stdlib.h>` or `<errno.h>`: the streams and files, `printf`, `getenv`, `errno` and the heap's
 * functions, `malloc` included, are declared here. `<stdint.h>`, `<stddef.h>`, `<stdbool.h>`, `<stdarg.h>` and clang's
 * `<gpuintrin.h>` (thread and block ids for both targets) are freestanding headers and work.
 *
 * Linking (docs/c-programs.md has the full commands). Build the startup once per target and arch as a static
 * library of LLVM bitcode, compile the program to bitcode, and link the two:
 *
 *   NVIDIA (PTX image):
 *     cargo rustc -p startup-nvptx --target nvptx64-nvidia-cuda -Zbuild-std=core --release --crate-type staticlib \
 *         --config 'target.nvptx64-nvidia-cuda.rustflags=["-Ctarget-cpu=sm_90"]'
 *     clang-22 --target=nvptx64-nvidia-cuda -march=sm_90 -Xclang -target-feature -Xclang +ptx78 \
 *         -nogpulib -ffreestanding -flto -O2 -I startup-common/include -c main.c -o main.o
 *     gpu-bitcode-linker main.o libstartup_nvptx.a --target nvptx64-nvidia-cuda --target-cpu sm_90 -o main.ptx -O3
 *
 *   AMD (code object):
 *     cargo rustc -p startup-amdgpu --target amdgcn-amd-amdhsa -Zbuild-std=core --release --crate-type staticlib \
 *         --config 'target.amdgcn-amd-amdhsa.rustflags=["-Ctarget-cpu=gfx90a","-Clinker-plugin-lto"]'
 *     clang-22 --target=amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -ffreestanding -flto -O2 \
 *         -I startup-common/include -c main.c -o main.o
 *     ld.lld-22 -shared --no-undefined -plugin-opt=mcpu=gfx90a -plugin-opt=O3 main.o libstartup_amdgpu.a -o main.elf
 *
 * Constructors and destructors: `__attribute__((constructor(N)))` / `__attribute__((destructor(N)))` with N from 0
 * to 65535 (leaving N out means 65535). Constructors run once, on one thread, before `main`, lowest N first;
 * destructors run at exit after every `atexit` handler, highest N first. A constructor is a `gpu_constructor_fn`
 * (it receives `main`'s arguments) or takes nothing; every destructor and `atexit` handler is a
 * `gpu_destructor_fn`. (PTX calls through a function pointer only with the callee's exact prototype: for NVIDIA,
 * gpu-bitcode-linker gives every constructor a wrapper that takes `main`'s arguments.)
 *
 * C++ programs include this header too (its declarations are `extern "C"`), and the startup's `<new>`;
 * docs/c-programs.md lists what C++ gets: global objects, `new`/`delete` on the heap, no exceptions, no RTTI.
 */
#ifndef GPU_STARTUP_H
#define GPU_STARTUP_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one prototype of a constructor: it gets main's arguments. */
typedef void gpu_constructor_fn(int argc, char **argv, char **envp);
/* The one prototype of a destructor or atexit handler. */
typedef void gpu_destructor_fn(void);

/* Declares and registers a constructor: GPU_CONSTRUCTOR(101, setup) { ... argc, argv, envp are in scope ... } */
#define GPU_CONSTRUCTOR(priority, name)                                                                            \
    __attribute__((constructor(priority))) void name(int argc, char **argv, char **envp)
/* Declares and registers a destructor: GPU_DESTRUCTOR(300, teardown) { ... } */
#define GPU_DESTRUCTOR(priority, name) __attribute__((destructor(priority))) void name(void)

/* The program's entry point, called by every thread; the exit code is the OR of every thread's result. */
int main(int argc, char **argv, char **envp);

/* Runs the atexit handlers (latest first) and the destructors, then ends the program with `status`. The first
   thread to call it runs the exit sequence; any other caller just stops. */
__attribute__((__noreturn__)) void exit(int status);
/* Ends the program at once, running no handler; the loader exits with 134. */
__attribute__((__noreturn__)) void abort(void);
/* Registers `handler` to run at exit; 0 on success, non-zero when the registry (1,023 entries, shared with C++'s
   destructors of global objects) is full. */
int atexit(gpu_destructor_fn *handler);

/* A stream: `stdin`, `stdout`, `stderr`, or a file `fopen` opened. Its contents are private to the startup. Every
   function checks the `FILE *` it is given: a pointer that is no stream, or a stream already closed, fails the call
   with `EBADF` (no memory is read through it). Streams are unbuffered on the device: each call is one message to the
   host, which buffers a file's writes until `fflush`, `fclose`, a read or seek of it, or the end of the run. Each
   call's output reaches its stream as one piece, never interleaved with another thread's. */
typedef struct gpu_startup_file FILE;
extern FILE *stdin;
extern FILE *stdout;
extern FILE *stderr;

#define EOF (-1)
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2
/* The most files a run may have open at once (the host's cap); one more `fopen` fails with `EMFILE`. */
#define FOPEN_MAX 256
/* The longest path, its NUL included; a longer one fails with `ENAMETOOLONG`. */
#define FILENAME_MAX 4096

/* Writes the string and a newline to stdout, as one line never interleaved with another thread's output; 0. */
int puts(const char *text);
/* Writes the string to `stream` as one piece; 0, or EOF on an error. */
int fputs(const char *text, FILE *stream);
/* Writes `size * count` bytes to `stream` as one piece; `count`, or 0 on an error. */
size_t fwrite(const void *data, size_t size, size_t count, FILE *stream);
/* Writes one character; the character (as unsigned char), or EOF on an error. */
int fputc(int character, FILE *stream);
int putc(int character, FILE *stream);
int putchar(int character);

/* Opens a file on the host. Paths are the loader's: a relative path is resolved from the loader's working directory.
   Modes: "r", "w", "a", each with "+", and "b" (no effect) and C11's "x" (with "w": fail if the file exists). Returns
   NULL with `errno` set: ENOENT (missing), EISDIR (a directory), EACCES, EEXIST, ENXIO (a FIFO or socket: refused),
   EINVAL (a mode C does not define), EMFILE (FOPEN_MAX files open), ENAMETOOLONG, ... */
FILE *fopen(const char *path, const char *mode);
/* Closes the stream after the host wrote out what it holds; 0, or EOF with `errno` set by a write that failed (the
   stream is closed either way). Closing stdin, stdout or stderr does nothing and returns 0. */
int fclose(FILE *stream);
/* Reads `count` items of `size` bytes; the number of whole items read (fewer at the end of the stream, `feof`, or on
   an error, `ferror`). A read of stdin waits until the loader's stdin has the bytes. */
size_t fread(void *data, size_t size, size_t count, FILE *stream);
/* Reads one line, up to and including its '\n', at most `size - 1` bytes, and a NUL; `buffer`, or NULL at the end of
   the stream before any byte or on an error. Threads reading lines of one stream at once each get whole lines, each
   line once (which thread gets which is not defined). */
char *fgets(char *buffer, int size, FILE *stream);
/* The next byte (as unsigned char), or EOF at the end of the stream or on an error. */
int fgetc(FILE *stream);
int getc(FILE *stream);
int getchar(void);
/* Has the host write out what it holds for the stream (for every open file when NULL); 0, or EOF with `errno` set. */
int fflush(FILE *stream);
/* Non-zero once a read met the end of the stream / once a call on it failed, until `clearerr` (`fseek` and `rewind`
   clear the first, `rewind` both). */
int feof(FILE *stream);
int ferror(FILE *stream);
void clearerr(FILE *stream);
/* Moves a file's position (`whence` SEEK_SET, SEEK_CUR or SEEK_END); 0, or -1 with `errno` set (ESPIPE for stdin,
   stdout and stderr). */
int fseek(FILE *stream, long offset, int whence);
/* A file's position, or -1 with `errno` set. */
long ftell(FILE *stream);
/* Back to the start; both indicators cleared. */
void rewind(FILE *stream);
/* Removes a file or an empty directory; 0, or -1 with `errno` set. */
int remove(const char *path);
/* Renames a file (replacing `to` if it is a file); 0, or -1 with `errno` set. */
int rename(const char *from, const char *to);

/* The value of `name` in the program's environment (the loader's, as `envp`), or NULL. */
char *getenv(const char *name);

/* `errno`: each thread has its own (0 when its kernel starts), set by a function that fails and never cleared by one
   that succeeds. The numbers are Linux's, the host's: the host's error comes through unchanged. */
int *__errno_location(void);
#define errno (*__errno_location())
#define EPERM 1
#define ENOENT 2
#define EINTR 4
#define EIO 5
#define ENXIO 6
#define EBADF 9
#define EAGAIN 11
#define ENOMEM 12
#define EACCES 13
#define EBUSY 16
#define EEXIST 17
#define EXDEV 18
#define ENODEV 19
#define ENOTDIR 20
#define EISDIR 21
#define EINVAL 22
#define ENFILE 23
#define EMFILE 24
#define EFBIG 27
#define ENOSPC 28
#define ESPIPE 29
#define EROFS 30
#define EPIPE 32
#define ERANGE 34
#define ENAMETOOLONG 36
#define ENOSYS 38
#define ENOTEMPTY 39
#define ELOOP 40
#define EOVERFLOW 75
/* Writes `prefix: ` (unless `prefix` is NULL or empty), the message of `errno` and a newline on stderr, as one line. */
void perror(const char *prefix);
/* The message of an error number, as glibc words it ("Unknown error" for a number not listed above); constant. */
char *strerror(int number);

/* C99's formatted output, formatted on the device (docs/c-programs.md lists what is supported): conversions
   d i u o x X b B c s p f F e E g G a A %, flags - + space # 0 ', widths and precisions (also `*`), length modifiers
   hh h l ll j z t L (`long double` is `double` on the GPU). Each call's output reaches the host as one piece, never
   interleaved with another thread's. The functions return the number of bytes written (snprintf: the length the
   whole text has), or -1: for a stream that cannot be written (`errno` EBADF) or a file the host could not write,
   `%n` (refused; nothing is written through its pointer), a positional argument (`%1$d`), a format that ends inside
   a conversion, or output over INT_MAX bytes; what came before the failing conversion is written. An unknown
   conversion is written as it stands. */
__attribute__((__format__(__printf__, 1, 2))) int printf(const char *format, ...);
__attribute__((__format__(__printf__, 2, 3))) int fprintf(FILE *stream, const char *format, ...);
__attribute__((__format__(__printf__, 3, 4))) int snprintf(char *buffer, size_t size, const char *format, ...);
__attribute__((__format__(__printf__, 2, 3))) int sprintf(char *buffer, const char *format, ...);
__attribute__((__format__(__printf__, 1, 0))) int vprintf(const char *format, va_list args);
__attribute__((__format__(__printf__, 2, 0))) int vfprintf(FILE *stream, const char *format, va_list args);
__attribute__((__format__(__printf__, 3, 0))) int vsnprintf(char *buffer, size_t size, const char *format,
                                                            va_list args);
__attribute__((__format__(__printf__, 2, 0))) int vsprintf(char *buffer, const char *format, va_list args);

/* The heap: device memory that gpu-loader reserves (--heap-size, 1 GiB by default), shared by every thread; any
   thread may free what another allocated. Blocks are 16-byte aligned. Running out gives NULL. A pointer that free or
   realloc cannot take (freed already, never allocated, not the start of a block) ends the program with a message
   naming the call and the pointer on stderr; the loader exits with 134, as for abort. docs/heap.md has the rest. */

/* `size` bytes, or NULL; malloc(0) returns a block of its own. */
void *malloc(size_t size);
/* Frees a block from malloc, calloc, realloc, aligned_alloc or posix_memalign; nothing for NULL. */
void free(void *pointer);
/* `count * size` zeroed bytes, or NULL (also when the product overflows). */
void *calloc(size_t count, size_t size);
/* The block's contents in a block of `size` bytes (the same block when its size already fits); NULL with the old
   block untouched when there is no room. realloc(NULL, size) is malloc(size); realloc(p, 0) frees p, returns NULL. */
void *realloc(void *pointer, size_t size);
/* `size` bytes aligned to `alignment`, a power of two (NULL otherwise), or NULL. */
void *aligned_alloc(size_t alignment, size_t size);
/* 0 with a block of `size` bytes aligned to `alignment` in *out; 22 (EINVAL) when `alignment` is not a power of two
   multiple of sizeof(void *), 12 (ENOMEM) when there is no room. */
int posix_memalign(void **out, size_t alignment, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* GPU_STARTUP_H */
