#include "sinks/clickhouse/ch_error_codes.h"

#include <stdlib.h>
#include <string.h>

#include "retry.h"

/* Codes and names from ClickHouse's src/Common/ErrorCodes.cpp. */
static const struct ch_code {
    long code;
    enum pfr_ch_verdict verdict;
    const char *name;
} ch_codes[] = {
    /* Credentials, rights, limits: nothing in the rows can change these. */
    {192, PFR_CH_SINK, "UNKNOWN_USER"},
    {193, PFR_CH_SINK, "WRONG_PASSWORD"},
    {194, PFR_CH_SINK, "REQUIRED_PASSWORD"},
    {195, PFR_CH_SINK, "IP_ADDRESS_NOT_ALLOWED"},
    {516, PFR_CH_SINK, "AUTHENTICATION_FAILED"},
    {497, PFR_CH_SINK, "ACCESS_DENIED"},
    {291, PFR_CH_SINK, "DATABASE_ACCESS_DENIED"},
    {512, PFR_CH_SINK, "SET_NON_GRANTED_ROLE"},
    {164, PFR_CH_SINK, "READONLY"},
    {201, PFR_CH_SINK, "QUOTA_EXCEEDED"}, /* QUOTA_EXPIRED in older servers */
    /* The statement itself (the same for every batch): this server does not take it. */
    {62, PFR_CH_SINK, "SYNTAX_ERROR"},
    {46, PFR_CH_SINK, "UNKNOWN_FUNCTION"},
    {115, PFR_CH_SINK, "UNKNOWN_SETTING"},
    /* Where the rows go. */
    {81, PFR_CH_SCHEMA, "UNKNOWN_DATABASE"},
    {60, PFR_CH_SCHEMA, "UNKNOWN_TABLE"},
    {16, PFR_CH_SCHEMA, "NO_SUCH_COLUMN_IN_TABLE"},
    {47, PFR_CH_SCHEMA, "UNKNOWN_IDENTIFIER"},
    /* The server is busy or failing: the same insert goes through later. */
    {159, PFR_CH_RETRY, "TIMEOUT_EXCEEDED"},
    {202, PFR_CH_RETRY, "TOO_MANY_SIMULTANEOUS_QUERIES"},
    {209, PFR_CH_RETRY, "SOCKET_TIMEOUT"},
    {210, PFR_CH_RETRY, "NETWORK_ERROR"},
    {241, PFR_CH_RETRY, "MEMORY_LIMIT_EXCEEDED"},
    {242, PFR_CH_RETRY, "TABLE_IS_READ_ONLY"},
    {252, PFR_CH_RETRY, "TOO_MANY_PARTS"},
    {319, PFR_CH_RETRY, "UNKNOWN_STATUS_OF_INSERT"},
    {394, PFR_CH_RETRY, "QUERY_WAS_CANCELLED"},
    {999, PFR_CH_RETRY, "KEEPER_EXCEPTION"},
    /* The rows (as every other 4xx): named here for the messages. */
    {6, PFR_CH_DATA, "CANNOT_PARSE_TEXT"},
    {27, PFR_CH_DATA, "CANNOT_PARSE_INPUT_ASSERTION_FAILED"},
    {33, PFR_CH_DATA, "CANNOT_READ_ALL_DATA"},
    {53, PFR_CH_DATA, "TYPE_MISMATCH"},
    {117, PFR_CH_DATA, "INCORRECT_DATA"},
};

static const struct ch_code *lookup(long code)
{
    for (size_t i = 0; i < sizeof(ch_codes) / sizeof(ch_codes[0]); i++)
        if (ch_codes[i].code == code)
            return &ch_codes[i];
    return NULL;
}

enum pfr_ch_verdict pfr_ch_verdict_of(long status, long code)
{
    const struct ch_code *c = code ? lookup(code) : NULL;
    /* Setting chunks aside cannot be undone: a server failure (5xx) never does it. */
    if (c && !(c->verdict == PFR_CH_DATA && status >= 500))
        return c->verdict;
    switch (pfr_outcome_of_status(status)) {
    case PFR_OUT_REJECT:
        return PFR_CH_DATA;
    case PFR_OUT_SINK:
        return PFR_CH_SINK;
    default:
        return PFR_CH_RETRY;
    }
}

const char *pfr_ch_code_name(long code)
{
    const struct ch_code *c = lookup(code);
    return c ? c->name : NULL;
}

static long parse_code(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return end != s && v > 0 && v < 100000 ? v : 0;
}

long pfr_ch_exception_code(const char *header, const char *body)
{
    if (header && header[0])
        return parse_code(header);
    const char *b = body ? strstr(body, "Code: ") : NULL;
    return b ? parse_code(b + 6) : 0;
}
