/*
 * slice_check FILE: open a ring file read-only as pfr does, run pfr_store_check over it and print
 * one line "chunks=N min_id=A max_id=B slice=0|1 from=NS to=NS id=HEX source_max_id=M" for the
 * shell tests. Exit 0 when the check passes, 1 otherwise (the reason on stderr).
 */
#include <inttypes.h>
#include <stdio.h>

#include "pfr_store.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: slice_check FILE\n");
        return 2;
    }
    pfr_store_opts o = {.read_only = true};
    pfr_store *s = NULL;
    char err[512] = "";
    pfr_store_stats st;
    pfr_slice_info si;
    int rc = pfr_store_open(argv[1], &o, &s, err, sizeof(err));
    if (!rc)
        rc = pfr_store_check(s, NULL, err, sizeof(err));
    if (!rc && !(rc = pfr_store_stats_get(s, &st)) && !(rc = pfr_store_slice_info(s, &si)))
        printf("chunks=%" PRIu64 " min_id=%" PRId64 " max_id=%" PRId64 " slice=%d from=%" PRId64
               " to=%" PRId64 " id=%016" PRIx64 " source_max_id=%" PRId64 "\n",
               st.chunks, st.min_id, st.max_id, si.is_slice, si.from_ns, si.to_ns, si.id,
               si.source_max_id);
    pfr_store_close(s);
    if (rc)
        fprintf(stderr, "slice_check: %s: %s\n", argv[1], err[0] ? err : "error");
    return rc ? 1 : 0;
}
