/*
 * sym_refusal: the limits every parser of the symbolizer checks before it pays for a mapped
 * file, and a parse's budget: its deadline and the first refusal (pfr_refusal.h) it met.
 */
#ifndef PFR_SYM_REFUSAL_H
#define PFR_SYM_REFUSAL_H

#include <stdint.h>

#include "pfr_refusal.h"

/* Limits of one file's parse. */
#define PFR_SYM_MAX_SECTIONS (1u << 14)   /* section headers (libelf keeps ~100 bytes each) */
#define PFR_SYM_MAX_SHSTRTAB (4u << 20)   /* section names (libelf reads them whole) */
#define PFR_SYM_MAX_NOTE     (64u << 10)  /* a note section or segment (build-ids are ~40 bytes) */
#define PFR_SYM_PARSE_NS     2000000000LL /* time budget of one file's parse, by default */

/* A parse's deadline (monotonic ns; 0: none) and the first refusal it met. */
struct pfr_sym_budget {
    int64_t deadline_ns;
    int refused; /* enum pfr_refusal */
};

/* Records reason (the first one wins) and returns rc. */
int pfr_sym_refuse(struct pfr_sym_budget *b, int reason, int rc);
/* True (and time_budget recorded) once the deadline has passed. */
int pfr_sym_budget_over(struct pfr_sym_budget *b);

#endif
