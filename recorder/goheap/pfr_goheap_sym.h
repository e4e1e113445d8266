/* pfr_goheap_sym: name Go heap frames with the recorder's symbolizer, so the CPU and heap
 * profilers share one symbol cache (ELF .symtab plus DWARF file:line from the Go binary). */
#ifndef PFR_GOHEAP_SYM_H
#define PFR_GOHEAP_SYM_H

#include "pfr_goheap.h"
#include "symbolizer.h"

/* A resolver over s (s must outlive the collector using it). */
pfr_goheap_resolver pfr_goheap_sym_resolver(pfr_symbolizer *s);

#endif
