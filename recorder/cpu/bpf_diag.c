/* Diagnosis of BPF load failures. Reads a few /proc and /sys files; no BPF calls. */
#include "bpf_diag.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define CAP_HINT                                                                                   \
    "run pfr-recorder as root, or grant CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and "                 \
    "CAP_DAC_READ_SEARCH (e.g. AmbientCapabilities= in its systemd unit)"

static bool has_cap(const struct __user_cap_data_struct *d, int cap)
{
    return (d[cap / 32].effective >> (cap % 32)) & 1u;
}

static size_t read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

void pfr_bpf_parse_lockdown(const char *text, char *out, size_t outlen)
{
    const char *b = strchr(text, '[');
    const char *e = b ? strchr(b, ']') : NULL;
    if (b && e)
        snprintf(out, outlen, "%.*s", (int)(e - b - 1), b + 1);
    else if (outlen)
        out[0] = '\0';
}

void pfr_bpf_env_read(pfr_bpf_env *env)
{
    memset(env, 0, sizeof(*env));
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) == 0) {
        env->cap_sys_admin = has_cap(data, CAP_SYS_ADMIN);
        env->cap_bpf = has_cap(data, CAP_BPF);
        env->cap_perfmon = has_cap(data, CAP_PERFMON);
    }
    env->btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
    char buf[256];
    if (read_small("/sys/kernel/security/lockdown", buf, sizeof(buf)))
        pfr_bpf_parse_lockdown(buf, env->lockdown, sizeof(env->lockdown));
    env->perf_paranoid = -100;
    if (read_small("/proc/sys/kernel/perf_event_paranoid", buf, sizeof(buf)))
        sscanf(buf, "%d", &env->perf_paranoid);
}

int pfr_bpf_precheck(const pfr_bpf_env *env, char *msg, size_t msglen)
{
    if (!env->cap_sys_admin && !(env->cap_bpf && env->cap_perfmon)) {
        snprintf(msg, msglen,
                 "missing capability %s%s%s (or CAP_SYS_ADMIN) needed to load the BPF "
                 "sampler: " CAP_HINT,
                 env->cap_bpf ? "" : "CAP_BPF", !env->cap_bpf && !env->cap_perfmon ? " and " : "",
                 env->cap_perfmon ? "" : "CAP_PERFMON");
        return -EPERM;
    }
    if (!env->btf) {
        snprintf(msg, msglen,
                 "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs "
                 "CONFIG_DEBUG_INFO_BTF=y): the CO-RE BPF sampler cannot be relocated");
        return -ENOTSUP;
    }
    if (!strcmp(env->lockdown, "confidentiality")) {
        snprintf(msg, msglen,
                 "the kernel is locked down in confidentiality mode, which forbids BPF programs "
                 "from reading kernel memory: boot with lockdown=integrity or none to profile");
        return -EPERM;
    }
    return 0;
}

void pfr_bpf_explain(const pfr_bpf_env *env, const char *step, int err, char *msg, size_t msglen)
{
    const char *why;
    char buf[256];
    switch (err) {
    case EPERM:
    case EACCES:
        if (!env->cap_sys_admin && !(env->cap_bpf && env->cap_perfmon)) {
            why = "missing capability CAP_BPF/CAP_PERFMON (or CAP_SYS_ADMIN): " CAP_HINT;
        } else if (!strcmp(env->lockdown, "confidentiality") ||
                   !strcmp(env->lockdown, "integrity")) {
            snprintf(buf, sizeof(buf),
                     "permission denied with kernel lockdown '%s' active: the lockdown policy "
                     "forbids this BPF use",
                     env->lockdown);
            why = buf;
        } else if (!strcmp(step, "perf_event_open") && env->perf_paranoid > 2) {
            snprintf(buf, sizeof(buf),
                     "perf events are restricted (kernel.perf_event_paranoid = %d) and the "
                     "process lacks CAP_PERFMON",
                     env->perf_paranoid);
            why = buf;
        } else if (err == EACCES && !strcmp(step, "load")) {
            why = "the kernel verifier rejected the program (run with --log-level debug for "
                  "libbpf's log)";
        } else {
            why = "permission denied (a security module such as SELinux, AppArmor or a seccomp "
                  "filter may forbid bpf() or perf_event_open())";
        }
        break;
    case EINVAL:
    case E2BIG:
        why = "the kernel rejected the program or a map (too old a kernel, or the verifier "
              "refused it; run with --log-level debug for libbpf's log)";
        break;
    case ENOENT:
    case ESRCH:
        why = env->btf ? "a kernel type or tracepoint the sampler needs is missing"
                       : "the kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y needed)";
        break;
    case ENOSYS:
    case EOPNOTSUPP:
        why = "this kernel does not support BPF or perf events (CONFIG_BPF_SYSCALL, "
              "CONFIG_PERF_EVENTS)";
        break;
    case EMFILE:
    case ENFILE:
        why = "too many open files (raise the file limit, e.g. LimitNOFILE=)";
        break;
    case ENOMEM:
        why = "not enough memory for the BPF maps (lower --stack-map-entries / "
              "--count-map-entries, or check the memory cgroup limit)";
        break;
    default:
        why = strerror(err);
    }
    snprintf(msg, msglen, "cannot start the BPF CPU sampler (%s: %s): %s", step, strerror(err),
             why);
}
