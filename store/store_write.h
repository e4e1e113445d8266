/* The writer (layer 5, internal; appends are public, pfr_store.h). */
#ifndef PFR_STORE_WRITE_H
#define PFR_STORE_WRITE_H

struct writer;

void pfr_st_writer_free(struct writer *w);

#endif
