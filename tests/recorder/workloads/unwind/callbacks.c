/* Callbacks through Debian's libc (qsort, bsearch) and through a shared library (libpfruwcb).
 *
 *   main -> run -> sort_round   -> qsort (libc: msort...)   -> by_value  -> hot_leaf   50%
 *               -> search_round -> bsearch (libc)           -> by_key    -> hot_leaf   25%
 *               -> lib_round    -> uwcb_each (libpfruwcb.so) -> lib_visit -> hot_leaf   25%
 *
 * Each callback runs the leaf for one unit; after each sort the program runs searches and library
 * rounds until each has half the sort's work, so the split holds within one round.
 * bsearch is called through a pointer: at -O2 <stdlib.h> would inline its own copy into this
 * program, and the point is a callback from libc's code.
 * Usage: uw-callbacks SECONDS; prints "truth by_value=N by_key=N lib_visit=N" (leaf iterations). */
#include "uw_common.h"

void uwcb_each(void (*fn)(void *, int), void *arg, int n);

#define N 256

static int values[N];
static unsigned long unit;
static unsigned long work_sort, work_search, work_lib;

UW_NOINLINE int by_value(const void *a, const void *b)
{
    uw_sink += hot_leaf(unit);
    work_sort += unit;
    return *(const int *)a - *(const int *)b;
}

UW_NOINLINE int by_key(const void *key, const void *elem)
{
    uw_sink += hot_leaf(unit);
    work_search += unit;
    return *(const int *)key - *(const int *)elem;
}

UW_NOINLINE void lib_visit(void *arg, int i)
{
    uw_sink += hot_leaf(*(unsigned long *)arg) + (unsigned long)i;
    work_lib += *(unsigned long *)arg;
}

UW_NOINLINE void sort_round(unsigned long long *seed)
{
    for (int i = N - 1; i > 0; i--) { /* shuffle the sorted array */
        int j = (int)(uw_unit(seed, 2 * N) % (unsigned long)(i + 1));
        int t = values[i];
        values[i] = values[j];
        values[j] = t;
    }
    qsort(values, N, sizeof(values[0]), by_value);
    uw_sink += (unsigned long)values[0];
}

void *(*volatile libc_bsearch)(const void *, const void *, size_t, size_t,
                               int (*)(const void *, const void *)) = bsearch;

UW_NOINLINE void search_round(unsigned long long *seed)
{
    int key = (int)(uw_unit(seed, 2 * N) % N);
    int *hit = libc_bsearch(&key, values, N, sizeof(values[0]), by_key);
    uw_sink += hit ? (unsigned long)*hit : 0;
}

UW_NOINLINE void lib_round(void)
{
    uwcb_each(lib_visit, &unit, 8);
    uw_sink += 1;
}

UW_NOINLINE void run(double seconds)
{
    uw_deadline end = uw_deadline_in(seconds);
    unsigned long long seed = uw_seed();
    for (int i = 0; i < N; i++)
        values[i] = i;
    while (uw_before(&end)) {
        unit = uw_unit(&seed, 400);
        sort_round(&seed);
        while (2 * work_search < work_sort)
            search_round(&seed);
        while (2 * work_lib < work_sort)
            lib_round();
    }
}

int main(int argc, char **argv)
{
    run(uw_seconds(argc, argv));
    printf("truth by_value=%lu by_key=%lu lib_visit=%lu\n", work_sort, work_search, work_lib);
    return 0;
}
