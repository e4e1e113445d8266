/*
 * pfr_clock: the clocks pfr reads, in nanoseconds. Header-only (static inline), so no library
 * exports them. clock_gettime on these clocks cannot fail on Linux with a valid clock id; a
 * failure reads as 0.
 *   mono:  CLOCK_MONOTONIC, for timeouts, rates and durations.
 *   real:  CLOCK_REALTIME, unix time, for timestamps that leave the process.
 *   boot:  CLOCK_BOOTTIME, monotonic across suspend; what BPF's bpf_ktime_get_boot_ns() reads.
 */
#ifndef PFR_CLOCK_H
#define PFR_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t pfr_clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t pfr_clock_mono_ns(void)
{
    return pfr_clock_ns(CLOCK_MONOTONIC);
}

static inline int64_t pfr_clock_real_ns(void)
{
    return pfr_clock_ns(CLOCK_REALTIME);
}

static inline int64_t pfr_clock_boot_ns(void)
{
    return pfr_clock_ns(CLOCK_BOOTTIME);
}

#endif
