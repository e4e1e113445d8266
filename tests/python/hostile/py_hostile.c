/* py_hostile: a process that looks like CPython 3.11 to pfr (it maps a libpython3.11.so whose
 * _PyRuntime, types and Py_Version are real symbols, fake_libpython.c) and lies in every way
 * its memory can, while it spins on the CPU to be sampled (python_hostile_itest.py):
 *
 *   good       a two-frame chain of well-formed code objects: hostile_ok called from
 *              hostile_caller (proves the walk reached this process at all)
 *   cycle      a frame whose caller is itself
 *   wild       code object pointers into unmapped and kernel memory
 *   lying      a code object of the right type whose name claims 2^40 characters, whose file
 *              points nowhere and whose line table claims 2^40 bytes
 *   freed      a code object in a page unmapped right after it ran (freed before the drain),
 *              the page mapped again with another code object (hostile_reused)
 *   threads    a thread list that loops on itself and never names the sampled thread
 *   kernel     _PyRuntime's interpreter list pointing into the kernel
 *   badlines   a line table of random bytes
 *   edge       a frame across the end of a mapping
 *   race       a second thread rewriting the frames' fields with random words as they are read
 *
 * Offsets are CPython 3.11's (recorder/python/py_layout.c). Usage: py_hostile SECONDS: of the
 * main thread's CPU time (each mode spins 50 ms of it: as many samples each, however busy the
 * machine), within 30 times as much wall time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

uint8_t *fake_py_runtime(void);
uint8_t *fake_py_code_type(void);
uint8_t *fake_py_str_type(void);
uint8_t *fake_py_bytes_type(void);

/* CPython 3.11 on x86-64 */
enum {
    RT_INTERP_HEAD = 40,
    IS_THREADS_HEAD = 16,
    TS_NEXT = 8,
    TS_CFRAME = 56,
    TS_TID = 160,
    CF_FRAME = 8,
    F_CODE = 32,
    F_PREVIOUS = 48,
    F_INSTR = 56,
    F_IS_ENTRY = 68,
    CO_FIRSTLINENO = 72,
    CO_FILENAME = 112,
    CO_QUALNAME = 128,
    CO_LINETABLE = 136,
    CO_CODE = 184,
    OB_TYPE = 8,
};

static void put(uint8_t *base, size_t off, uint64_t v)
{
    memcpy(base + off, &v, sizeof(v));
}

/* Every object lives as long as the process: from a static arena (nothing to free, nothing a
 * leak checker could call lost). */
static _Alignas(64) uint8_t arena[1 << 20];
static size_t arena_used;

static uint8_t *zalloc(size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (n > sizeof(arena) - arena_used)
        abort();
    uint8_t *p = arena + arena_used;
    arena_used += n;
    return p;
}

/* An ASCII str object. */
static uint8_t *str_obj(const char *s)
{
    size_t n = strlen(s);
    uint8_t *o = zalloc(48 + n + 1);
    put(o, OB_TYPE, (uint64_t)(uintptr_t)fake_py_str_type());
    put(o, 16, n);
    uint32_t state = 1u << 2 | 1u << 5 | 1u << 6; /* kind 1, compact, ascii */
    memcpy(o + 32, &state, sizeof(state));
    memcpy(o + 48, s, n);
    return o;
}

static uint8_t *bytes_obj(const uint8_t *b, size_t n)
{
    uint8_t *o = zalloc(32 + n + 1);
    put(o, OB_TYPE, (uint64_t)(uintptr_t)fake_py_bytes_type());
    put(o, 16, n);
    memcpy(o + 32, b, n);
    return o;
}

/* A code object at o (256 bytes) named name, its line table one entry: line first + 2. */
static void code_at(uint8_t *o, const char *name, int32_t first)
{
    static const uint8_t table[] = {0x80 | 13 << 3 | 7, 4}; /* no columns, 8 units, +2 */
    memset(o, 0, 256);
    put(o, OB_TYPE, (uint64_t)(uintptr_t)fake_py_code_type());
    put(o, 16, 1024); /* ob_size: its code units */
    memcpy(o + CO_FIRSTLINENO, &first, sizeof(first));
    put(o, CO_QUALNAME, (uint64_t)(uintptr_t)str_obj(name));
    put(o, CO_FILENAME, (uint64_t)(uintptr_t)str_obj("/hostile/hostile.py"));
    put(o, CO_LINETABLE, (uint64_t)(uintptr_t)bytes_obj(table, sizeof(table)));
}

static void frame_set(uint8_t *f, const uint8_t *code, const uint8_t *prev, int entry)
{
    memset(f, 0, 80);
    put(f, F_CODE, (uint64_t)(uintptr_t)code);
    put(f, F_PREVIOUS, (uint64_t)(uintptr_t)prev);
    put(f, F_INSTR, code ? (uint64_t)(uintptr_t)code + CO_CODE : 0);
    f[F_IS_ENTRY] = (uint8_t)entry;
}

static atomic_int racing;
static uint8_t *race_frames;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *scribbler(void *arg)
{
    (void)arg;
    uint64_t s = 88172645463325252ull;
    for (;;) {
        if (atomic_load(&racing))
            for (int i = 0; i < 4 * 80 / 8; i++)
                put(race_frames, (size_t)(rnd(&s) % (4 * 80 / 8)) * 8, rnd(&s));
        else
            usleep(1000);
    }
    return NULL;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile uint64_t sink;

static double now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static void spin(double secs)
{
    double end = now() + secs;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += (uint64_t)i * i;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 10;
    uint8_t *rt = fake_py_runtime();
    uint8_t *interp = zalloc(4096), *ts = zalloc(4096), *cframe = zalloc(64);
    uint64_t tid = (uint64_t)gettid();
    put(rt, RT_INTERP_HEAD, (uint64_t)(uintptr_t)interp);
    put(interp, IS_THREADS_HEAD, (uint64_t)(uintptr_t)ts);
    put(ts, TS_TID, tid);
    put(ts, TS_CFRAME, (uint64_t)(uintptr_t)cframe);

    uint8_t *ok = zalloc(256), *caller = zalloc(256), *lying = zalloc(256), *bad = zalloc(256);
    code_at(ok, "hostile_ok", 7);
    code_at(caller, "hostile_caller", 20);
    code_at(lying, "x", 1);
    code_at(bad, "hostile_badlines", 30);
    uint8_t *huge = zalloc(64);
    put(huge, OB_TYPE, (uint64_t)(uintptr_t)fake_py_str_type());
    put(huge, 16, 1ull << 40);
    uint32_t state = 4u << 2 | 1u << 5; /* kind 4, compact, not ascii */
    memcpy(huge + 32, &state, sizeof(state));
    put(lying, CO_QUALNAME, (uint64_t)(uintptr_t)huge);
    put(lying, CO_FILENAME, 0x10);
    uint8_t *hugeb = zalloc(64);
    put(hugeb, OB_TYPE, (uint64_t)(uintptr_t)fake_py_bytes_type());
    put(hugeb, 16, 1ull << 40);
    put(lying, CO_LINETABLE, (uint64_t)(uintptr_t)hugeb);
    uint8_t noise[512];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(noise); i++)
        noise[i] = (uint8_t)rnd(&s);
    put(bad, CO_LINETABLE, (uint64_t)(uintptr_t)bytes_obj(noise, sizeof(noise)));

    uint8_t *freed = zalloc(256), *reused = zalloc(256); /* copied into the page that goes */
    code_at(freed, "hostile_freed", 40);
    code_at(reused, "hostile_reused", 40);
    uint8_t *f = zalloc(80 * 8);
    race_frames = zalloc(80 * 4);
    /* a page followed by an unmapped one, for a frame across the end */
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *edge =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (edge == MAP_FAILED)
        return 1;
    munmap(edge + pg, (size_t)pg);
    pthread_t th;
    pthread_create(&th, NULL, scribbler, NULL);

    static const char *modes[] = {"good",    "cycle",  "wild",     "lying", "freed",
                                  "threads", "kernel", "badlines", "edge",  "race"};
    const int nmodes = sizeof(modes) / sizeof(modes[0]);
    double end = now() + secs, wall_end = clock_s(CLOCK_MONOTONIC) + 30 * secs;
    unsigned long rounds = 0;
    for (int m = 0; now() < end && clock_s(CLOCK_MONOTONIC) < wall_end; m = (m + 1) % nmodes) {
        /* restore what the previous mode broke */
        put(rt, RT_INTERP_HEAD, (uint64_t)(uintptr_t)interp);
        put(ts, TS_NEXT, 0);
        put(ts, TS_TID, tid);
        uint8_t *top = f, *page = NULL;
        switch (m) {
        case 0: /* good */
            frame_set(f, ok, f + 80, 0);
            frame_set(f + 80, caller, NULL, 1);
            break;
        case 1: /* cycle */
            frame_set(f, ok, f, 0);
            break;
        case 2: /* wild */
            frame_set(f, (uint8_t *)(uintptr_t)0xdead00000000ull, f + 80, 0);
            frame_set(f + 80, (uint8_t *)(uintptr_t)0xffffffff81000000ull, f + 160, 0);
            frame_set(f + 160, ok, (uint8_t *)(uintptr_t)0x7, 1);
            break;
        case 3: /* lying */
            frame_set(f, lying, f + 80, 0);
            frame_set(f + 80, caller, NULL, 1);
            break;
        case 4: /* freed: the page goes away after this round, another takes its place */
            page =
                mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (page == MAP_FAILED)
                return 1;
            memcpy(page, (rounds / nmodes) % 2 ? reused : freed, 256);
            frame_set(f, page, f + 80, 0);
            frame_set(f + 80, caller, NULL, 1);
            break;
        case 5: /* threads: a loop that never names this thread */
            put(ts, TS_NEXT, (uint64_t)(uintptr_t)ts);
            put(ts, TS_TID, tid + 1000000);
            break;
        case 6: /* kernel */
            put(rt, RT_INTERP_HEAD, 0xffff888000000000ull);
            break;
        case 7: /* badlines */
            frame_set(f, bad, f + 80, 0);
            frame_set(f + 80, caller, NULL, 1);
            put(f, F_INSTR, (uint64_t)(uintptr_t)bad + CO_CODE + 2 * 300);
            break;
        case 8: /* edge: the frame's last bytes past the mapping's end */
            top = edge + pg - 40;
            memset(top, 0, 40);
            put(top, F_CODE, (uint64_t)(uintptr_t)ok);
            break;
        case 9: /* race */
            frame_set(race_frames, ok, race_frames + 80, 0);
            frame_set(race_frames + 80, caller, race_frames + 160, 0);
            top = race_frames;
            atomic_store(&racing, 1);
            break;
        }
        put(cframe, CF_FRAME, (uint64_t)(uintptr_t)top);
        spin(0.05);
        atomic_store(&racing, 0);
        put(cframe, CF_FRAME, 0);
        if (page)
            munmap(page, (size_t)pg);
        rounds++;
    }
    printf("py_hostile: %lu rounds of %d modes\n", rounds, nmodes);
    return 0;
}
