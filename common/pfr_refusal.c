#include "pfr_refusal.h"

const char *pfr_refusal_name(int reason)
{
    static const char *const names[PFR_NREFUSALS] = {
        [PFR_REFUSED_NONE] = "none",
        [PFR_REFUSED_TOO_BIG] = "too_big",
        [PFR_REFUSED_TOO_MANY_SYMBOLS] = "too_many_symbols",
        [PFR_REFUSED_BAD_FILE] = "bad_file",
        [PFR_REFUSED_TIME_BUDGET] = "time_budget",
    };
    return reason >= 0 && reason < PFR_NREFUSALS ? names[reason] : "unknown";
}
