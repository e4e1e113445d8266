/*
 * pfr_system_service: which systemd units Coroot's node agent leaves out as system services
 * (coroot-node-agent containers/systemd.go IsSystemService, registry.go), shared by the recorder
 * (which classes them) and the shipper (whose Coroot-side sinks leave them out, like the agent).
 * Pure functions: no I/O, no allocation, any thread.
 */
#ifndef PFR_SYSTEM_SERVICE_H
#define PFR_SYSTEM_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

/* The node agent's default list of system services' unit name prefixes (systemd.go
 * systemServicePrefixes), comma-separated: the system_service_prefixes settings' default. */
#define PFR_SYSTEM_SERVICE_PREFIXES                                                                \
    "systemd-,dbus,getty,system-serial,system-getty,serial-getty,snapd,packagekit,"                \
    "unattended-upgrades,multipathd,qemu-guest-agent,irqbalance,networkd-dispatcher,rpcbind"

/* The unit the agent asks systemd about for a cgroup path: its first component that ends in
 * ".service", else its last component ("/system.slice/system-getty.slice/getty@tty1.service"
 * -> "getty@tty1.service"). @return 0 or -ENAMETOOLONG (out ""). */
int pfr_system_service_unit(const char *cgroup, char *out, size_t outlen);

/* Whether the agent skips a systemd unit as a system service: its Type is "oneshot" or "dbus",
 * its TriggeredBy (first unit) ends in ".timer", or its name starts with one of prefixes
 * (comma-separated; NULL = the default list). type and triggered_by may be NULL (unknown:
 * systemd was not asked). */
bool pfr_system_service_is(const char *unit, const char *type, const char *triggered_by,
                           const char *prefixes);

/* Whether prefixes is a list pfr_system_service_is takes: comma-separated non-empty names of
 * unit characters ([A-Za-z0-9:_.@\-]). @return 0, or -EINVAL with the reason in err. */
int pfr_system_service_prefixes_check(const char *prefixes, char *err, size_t errlen);

/* Whether a Coroot container id is a systemd service's ("/<slice>.slice/<unit or sub-slice>",
 * slice one of the agent's: system, runtime, reserved, kube, azure, podruntime), the only ids
 * the agent's filter looks at. @return true with the unit the id names written to unit (a
 * templated unit's id names its sub-slice: "system-getty.slice"), else false (unit ""). */
bool pfr_system_service_id_unit(const char *container_id, char *unit, size_t unitlen);

#endif
