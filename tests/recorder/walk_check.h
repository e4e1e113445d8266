/* Shared by walk_check.bpf.c and walk_check.c. */
#ifndef PFR_WALK_CHECK_H
#define PFR_WALK_CHECK_H

#include "cpu_profile.h"

/* Per process under test (key: tgid). */
struct pfr_walk_tally {
    __u64 compared;    /* samples whose user stack both walks read */
    __u64 differ;      /* ... and got different frames */
    __u64 in_kernel;   /* compared samples taken in the kernel (saved user registers) */
    __u64 frames;      /* frames compared */
    __u64 not_walked;  /* samples the sampler leaves to the kernel's walk (32-bit, ...) */
    __u64 kernel_fail; /* samples the kernel's walk could not read */
};

/* The first difference seen, for the test's message. */
struct pfr_walk_diff {
    __u32 tgid;
    __u32 n_walk, n_kernel;
    __u32 pad;
    __u64 walk[PFR_MAX_STACK_DEPTH];
    __u64 kernel[PFR_MAX_STACK_DEPTH];
};

#endif
