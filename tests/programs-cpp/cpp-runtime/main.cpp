/* A C++ program on the GPU. Global objects are constructed by priority (`init_priority`, then the inline variable,
   the template's static member and the ordered globals of default priority, in the order clang lists them) and
   destroyed in the reverse order, interleaved with `atexit` handlers as C++ requires: each object's destructor is
   registered when its construction completes, in one last-in first-out registry with the handlers. C's
   constructor and destructor attributes sit between them (a C destructor runs after every C++ one). `main` runs on
   every thread: virtual calls, templates, `new` and `delete` in all their forms (arrays, over-aligned types,
   `nothrow`, placement), and checks every object; thread 0 adds a function-local static and an `atexit` handler.
   `argv[1]` picks a variant that checks something else (its expect.<variant>.toml). */
#include <gpu_startup.h>
#include <gpuintrin.h>
#include <new>
#include <stdint.h>

namespace {

struct Tracer {
    const char *name;
    explicit Tracer(const char *name) : name(name) { printf("construct %s\n", name); }
    ~Tracer() { printf("destroy %s\n", name); }
};

/* Heap objects made and destroyed by every thread, counted with device atomics; printed at exit, once every
   thread has finished. */
struct Census {
    unsigned long constructed = 0;
    unsigned long destroyed = 0;
    unsigned long expected = 0;
    uintptr_t addresses = 0;
    ~Census() {
        printf("heap objects: %lu constructed, %lu destroyed, %lu expected\n", constructed, destroyed, expected);
    }
} census;

void count(unsigned long *counter) { __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED); }

/* Lets a block's address escape, so that the compiler cannot elide its allocation (C++ lets it elide a new
   expression whose block nothing else observes): every block really comes from the device heap. */
template <typename T> T *keep(T *block) {
    __atomic_fetch_xor(&census.addresses, reinterpret_cast<uintptr_t>(block), __ATOMIC_RELAXED);
    return block;
}

/* Defined out of order on purpose: the priorities decide. */
Tracer late("global of default priority");
Tracer middle __attribute__((init_priority(200)))("global of priority 200");
Tracer early __attribute__((init_priority(101)))("global of priority 101");

void handler_from_c_constructor() { puts("atexit handler registered by the C constructor"); }
void handler_from_main() { puts("atexit handler registered by main"); }

/* A C constructor that takes no arguments: the bitcode linker gives it a wrapper with main's (NVIDIA). */
__attribute__((constructor(150))) void c_constructor() {
    puts("C constructor of priority 150");
    atexit(handler_from_c_constructor);
}

__attribute__((destructor(300))) void c_destructor() { puts("C destructor of priority 300"); }

template <typename T> struct Registry {
    static Tracer tracer;
};
template <typename T> Tracer Registry<T>::tracer("static member of a class template");

} // namespace

inline Tracer inline_variable("inline variable");

namespace {

/* The function-local static of thread 0. */
Tracer &local_static() {
    static Tracer tracer("function-local static");
    return tracer;
}

/* ---- virtual calls and templates ---- */

struct Shape {
    Shape() { count(&census.constructed); }
    virtual ~Shape() { count(&census.destroyed); }
    virtual long area() const = 0;
    virtual int corners() const = 0;
};

template <typename T> struct Rectangle : Shape {
    T width, height;
    Rectangle(T width, T height) : width(width), height(height) {}
    long area() const override { return static_cast<long>(width * height); }
    int corners() const override { return 4; }
};

struct Square final : Rectangle<long> {
    explicit Square(long side) : Rectangle(side, side) {}
};

template <int N> struct Fan : Shape {
    long spoke;
    explicit Fan(long spoke) : spoke(spoke) {}
    long area() const override { return N * spoke; }
    int corners() const override { return N; }
};

/* Over-aligned: `new` passes its alignment (std::align_val_t), `delete` too. */
struct alignas(256) Aligned final : Shape {
    long value;
    explicit Aligned(long value) : value(value) {}
    long area() const override { return value; }
    int corners() const override { return 0; }
};

template <typename T, typename F> T fold(const T *items, int count, T initial, F step) {
    for (int i = 0; i < count; i++)
        initial = step(initial, items[i]);
    return initial;
}

template <typename... Ts> constexpr long sum(Ts... values) { return (0L + ... + static_cast<long>(values)); }
static_assert(sum(1, 2u, 3L) == 6);

/* Element of an array `new[]` must destroy: the array carries its length (a cookie). */
struct Counted {
    long value = 7;
    Counted() { count(&census.constructed); }
    ~Counted() { count(&census.destroyed); }
};

constexpr int ROUNDS = 20;
constexpr int SHAPES = 5;
constexpr int COUNTED = 3;
/* Heap objects a thread constructs (and destroys) a round, and the square it constructs in place. */
constexpr int COUNTED_PER_ROUND = SHAPES + COUNTED + 1;

bool fail(unsigned thread, const char *what, long got, long expected) {
    fprintf(stderr, "thread %u: %s is %ld, expected %ld\n", thread, what, got, expected);
    return false;
}

/* One thread's work: every form of new and delete, checked. */
bool exercise_the_heap(unsigned thread) {
    for (int round = 0; round < ROUNDS; round++) {
        long n = thread * 100 + round + 1;
        Shape **shapes = keep(new Shape *[SHAPES]);
        shapes[0] = keep(new Rectangle<int>(static_cast<int>(n), 3));
        shapes[1] = keep(new Rectangle<double>(static_cast<double>(n), 0.5));
        shapes[2] = keep(new Square(n));
        shapes[3] = keep(new Fan<6>(n));
        shapes[4] = keep(new Aligned(n));
        const long expected_areas[SHAPES] = {3 * n, n / 2, n * n, 6 * n, n};
        const int expected_corners[SHAPES] = {4, 4, 4, 6, 0};
        for (int i = 0; i < SHAPES; i++) {
            if (shapes[i]->area() != expected_areas[i])
                return fail(thread, "an area", shapes[i]->area(), expected_areas[i]);
            if (shapes[i]->corners() != expected_corners[i])
                return fail(thread, "a corner count", shapes[i]->corners(), expected_corners[i]);
        }
        if (reinterpret_cast<uintptr_t>(shapes[4]) % 256 != 0)
            return fail(thread, "an over-aligned object's address modulo 256",
                        static_cast<long>(reinterpret_cast<uintptr_t>(shapes[4]) % 256), 0);
        long areas[SHAPES];
        for (int i = 0; i < SHAPES; i++)
            areas[i] = shapes[i]->area();
        long total = fold(areas, SHAPES, 0L, [](long sum, long area) { return sum + area; });
        if (total != sum(3 * n, n / 2, n * n, 6 * n, n))
            return fail(thread, "the total area", total, sum(3 * n, n / 2, n * n, 6 * n, n));
        for (int i = 0; i < SHAPES; i++)
            delete shapes[i]; /* virtual destructors, then the sized (and aligned) delete */
        delete[] shapes;

        Counted *counted = keep(new Counted[COUNTED]);
        for (int i = 0; i < COUNTED; i++)
            if (counted[i].value != 7)
                return fail(thread, "a default-constructed array element", counted[i].value, 7);
        delete[] counted;

        int *zeroed = keep(new (std::nothrow) int[64]());
        if (zeroed == nullptr)
            return fail(thread, "a nothrow new[] of 256 bytes", 0, 1);
        for (int i = 0; i < 64; i++)
            if (zeroed[i] != 0)
                return fail(thread, "a value-initialized int", zeroed[i], 0);
        delete[] zeroed;

        alignas(Square) unsigned char storage[sizeof(Square)];
        Square *placed = new (storage) Square(n);
        bool in_place = static_cast<void *>(placed) == storage && placed->area() == n * n;
        placed->~Square();
        if (!in_place)
            return fail(thread, "a placement-new square's area", placed->area(), n * n);
    }
    return true;
}

/* ---- the variants ---- */

bool equal(const char *a, const char *b) {
    while (*a != 0 && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Every thread reaches it at once: one constructs it while the others wait (NVIDIA); AMD's wavefronts cannot wait
   for one of their own lanes, and the startup says so. */
struct Table {
    unsigned values[64];
    Table() {
        puts("construct the shared table");
        /* Slowly, so that the other threads arrive while it is under construction. */
        for (unsigned i = 0; i < 64; i++) {
            __gpu_thread_suspend();
            values[i] = i * i;
        }
    }
    ~Table() { puts("destroy the shared table"); }
};

const Table &shared_table() {
    static Table table;
    return table;
}

int recursive_static(int depth);
struct Recursive {
    int value;
    explicit Recursive(int depth) : value(recursive_static(depth + 1)) {}
};
int recursive_static(int depth) {
    static Recursive recursive(depth);
    return recursive.value + depth;
}

struct Base {
    Base() { call_it(); }
    void call_it() { pure(); }
    virtual void pure() = 0;
    virtual ~Base() = default;
};
struct Derived final : Base {
    void pure() override { puts("unreachable"); }
};

int variant(const char *name, unsigned thread, int argc) {
    if (equal(name, "statics")) {
        const Table &table = shared_table();
        for (unsigned i = 0; i < 64; i++)
            if (table.values[i] != i * i)
                return fail(thread, "a value of the shared table", table.values[i], i * i) ? 0 : 1;
        return 0;
    }
    if (equal(name, "recursive-static"))
        return recursive_static(0);
    if (equal(name, "pure-virtual")) {
        Derived derived;
        return 1;
    }
    if (equal(name, "new-fails")) {
        char *nothing = keep(new (std::nothrow) char[64 << 20]);
        printf("nothrow new[] of 64 MiB: %s\n", nothing == nullptr ? "nullptr" : "a block");
        char *block = keep(new char[64 << 20]);
        return block == nullptr;
    }
    if (equal(name, "bad-alignment")) {
        void *block = keep(operator new(64, static_cast<std::align_val_t>(argc * 12))); /* 24 */
        return block == nullptr;
    }
    if (equal(name, "double-delete")) {
        Counted *counted = keep(new Counted);
        delete counted;
        delete counted;
        return 1;
    }
    fprintf(stderr, "unknown variant `%s`\n", name);
    return 2;
}

} // namespace

int main(int argc, char **argv, char **envp) {
    (void)envp;
    unsigned thread = __gpu_num_threads(0) * __gpu_block_id(0) + __gpu_thread_id(0);
    if (argc > 1)
        return variant(argv[1], thread, argc);
    if (thread == 0) {
        printf("main: %s\n", local_static().name);
        printf("main: %s\n", Registry<int>::tracer.name);
        atexit(handler_from_main);
    }
    unsigned threads = __gpu_num_threads(0) * __gpu_num_blocks(0);
    if (thread == 0)
        census.expected = static_cast<unsigned long>(threads) * ROUNDS * COUNTED_PER_ROUND;
    return exercise_the_heap(thread) ? 0 : 1;
}
