/*
 * pfr_refusal: why a file another process maps (a library, an executable, a perf map) was
 * refused before it was paid for. Every such file is hostile input: each size or count it
 * declares is checked against a limit before memory is allocated or anything inflated for it,
 * and its parse has a time budget. The reasons are the label values of the
 * `*_files_refused_total{reason}` metrics.
 */
#ifndef PFR_REFUSAL_H
#define PFR_REFUSAL_H

enum pfr_refusal {
    PFR_REFUSED_NONE,
    PFR_REFUSED_TOO_BIG, /* a declared size over its limit (a table, an inflated section) */
    PFR_REFUSED_TOO_MANY_SYMBOLS, /* a symbol table holding (or declaring) more than the limit */
    PFR_REFUSED_BAD_FILE,         /* inconsistent headers: a count beyond its section, offsets
                                     outside the file */
    PFR_REFUSED_TIME_BUDGET,      /* the parse passed its time budget and was abandoned */
    PFR_NREFUSALS
};

/* "too_big", "too_many_symbols", "bad_file", "time_budget" ("none", "unknown"). */
const char *pfr_refusal_name(int reason);

#endif
