/*
 * naming: the service name and container id a process's profiles carry, from what is known of
 * it (process_info's facts), the configured rules (service.h) and the Coroot identity of its
 * cgroup (recorder/identity). Shared by every source, so a process is named alike in its CPU,
 * Go heap and scraped profiles.
 */
#ifndef PFR_RECORDER_NAMING_H
#define PFR_RECORDER_NAMING_H

#include <stdbool.h>
#include <stddef.h>

#include "pfr_identity.h"
#include "service.h"

/* Name a process (pid: one of the cgroup's processes, 0 if none is known). Writes service
 * (servicelen bytes) and container_id (PFR_CONTAINER_ID_MAX + 1 bytes, "" = none). identity may
 * be NULL: the identities a cgroup path gives alone (systemd services) are still used. Returns
 * true when the cgroup's metadata is still being looked for: the process is named by what is
 * known now, and should be named again later. Never blocks on I/O. */
bool pfr_name_process(pfr_identity *identity, const pfr_service_rules *rules,
                      const pfr_process_facts *f, int pid, char *service, size_t servicelen,
                      char *container_id);

#endif
