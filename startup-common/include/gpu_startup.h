/*
 * gpu_startup.h: what the GPU startup gives a C program.
 *
 * A GPU program is an ordinary C program: it defines `int main(int argc, char **argv, char **envp)`, which every
 * thread of the launch grid calls, and `gpu-loader IMAGE [ARGS...]` runs it. There is no libc: a program gets exactly
 * what this header declares, all defined by the startup (crates `startup-nvptx` / `startup-amdgpu`). There is no
 * `<stdio.h>` or `<stdlib.h>`: the printing functions, `printf` included, and the heap's, `malloc` included, are
 * declared here. `<stdint.h>`, `<stddef.h>`, `<stdbool.h>`, `<stdarg.h>` and clang's `<gpuintrin.h>` (thread and
 * block ids for both targets) are freestanding headers and work.
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

/* A stream: only `stdout` and `stderr` exist. Its contents are private to the startup; compare addresses only. */
typedef struct gpu_startup_file FILE;
extern FILE *stdout;
extern FILE *stderr;

/* Writes the string and a newline to stdout, as one line never interleaved with another thread's output; 0. */
int puts(const char *text);
/* Writes the string to `stream` as one piece; 0, or -1 when `stream` is neither stdout nor stderr. */
int fputs(const char *text, FILE *stream);
/* Writes `size * count` bytes to `stream` as one piece; `count`, or 0 when `stream` is unknown. */
size_t fwrite(const void *data, size_t size, size_t count, FILE *stream);

/* C99's formatted output, formatted on the device (docs/c-programs.md lists what is supported): conversions
   d i u o x X b B c s p f F e E g G a A %, flags - + space # 0 ', widths and precisions (also `*`), length modifiers
   hh h l ll j z t L (`long double` is `double` on the GPU). Each call's output reaches the host as one piece, never
   interleaved with another thread's. The functions return the number of bytes written (snprintf: the length the
   whole text has), or -1: for a stream other than stdout/stderr, `%n` (refused; nothing is written through its
   pointer), a positional argument (`%1$d`), a format that ends inside a conversion, or output over INT_MAX bytes;
   what came before the failing conversion is written. An unknown conversion is written as it stands. */
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
