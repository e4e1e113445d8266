/* bpf_diag: clear reasons when the CPU sampler cannot be loaded (capabilities, BTF, lockdown). */
#ifndef PFR_RECORDER_BPF_DIAG_H
#define PFR_RECORDER_BPF_DIAG_H

#include <stdbool.h>
#include <stddef.h>

/* What the checks look at, gathered from the running system by pfr_bpf_env_read(). */
typedef struct pfr_bpf_env {
    bool cap_sys_admin, cap_bpf, cap_perfmon; /* effective capabilities */
    bool btf;                                 /* /sys/kernel/btf/vmlinux readable */
    char lockdown[64]; /* selected mode from /sys/kernel/security/lockdown, "" if unknown */
    int perf_paranoid; /* kernel.perf_event_paranoid, or -100 if unknown */
} pfr_bpf_env;

void pfr_bpf_env_read(pfr_bpf_env *env);

/* Before loading: returns 0 if nothing is known to be wrong, else -EPERM / -ENOTSUP with the
 * reason in msg. */
int pfr_bpf_precheck(const pfr_bpf_env *env, char *msg, size_t msglen);

/* After a failure of step ("load", "perf_event_open", "attach") with errno err (positive):
 * a sentence naming the likely cause, in msg. */
void pfr_bpf_explain(const pfr_bpf_env *env, const char *step, int err, char *msg, size_t msglen);

/* Parse the selected mode ("[none]" style) of /sys/kernel/security/lockdown text into out. */
void pfr_bpf_parse_lockdown(const char *text, char *out, size_t outlen);

#endif
