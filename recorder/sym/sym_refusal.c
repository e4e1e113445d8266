#include "sym_refusal.h"

#include "pfr_clock.h"

int pfr_sym_refuse(struct pfr_sym_budget *b, int reason, int rc)
{
    if (b && b->refused == PFR_REFUSED_NONE)
        b->refused = reason;
    return rc;
}

int pfr_sym_budget_over(struct pfr_sym_budget *b)
{
    if (!b || b->deadline_ns == 0 || pfr_clock_mono_ns() < b->deadline_ns)
        return 0;
    pfr_sym_refuse(b, PFR_REFUSED_TIME_BUDGET, 0);
    return 1;
}
