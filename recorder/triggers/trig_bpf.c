/* The triggers' BPF program: loaded, attached, and its events turned into deaths. */
#include "trig_internal.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "triggers.h"
#include "triggers.skel.h"

struct pfr_trig_bpf {
    struct triggers_bpf *skel;
    struct ring_buffer *rb;
    pfr_trig_death_fn fn;
    void *ctx;
};

/* The path from the components the kernel walked leaf first. */
static void cgroup_path(const struct pfr_trig_event *e, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    if (e->truncated)
        len += (size_t)snprintf(out, cap, "/...");
    for (unsigned i = e->depth; i-- > 0 && len < cap;) {
        char name[PFR_TRIG_CGROUP_NAME + 1];
        memcpy(name, e->cgroup[i], PFR_TRIG_CGROUP_NAME);
        name[PFR_TRIG_CGROUP_NAME] = '\0';
        len += (size_t)snprintf(out + len, cap - len, "/%s", name);
    }
    if (!out[0])
        snprintf(out, cap, "/");
}

static int on_event(void *ctx, void *data, size_t size)
{
    pfr_trig_bpf *b = ctx;
    const struct pfr_trig_event *e = data;
    if (size < sizeof(*e))
        return 0;
    pfr_trig_death d = {
        .kind = e->kind == PFR_TRIG_EV_OOM ? PFR_PIN_OOM_KILL : PFR_PIN_FATAL_SIGNAL,
        .tgid = (int32_t)e->tgid,
        .signal = (int)(e->exit_code & 0x7f),
        .core = (e->exit_code & 0x80) != 0,
    };
    memcpy(d.comm, e->comm, sizeof(d.comm));
    d.comm[sizeof(d.comm) - 1] = '\0';
    cgroup_path(e, d.cgroup, sizeof(d.cgroup));
    b->fn(b->ctx, &d);
    return 0;
}

void pfr_trig_bpf_free(pfr_trig_bpf *b)
{
    if (!b)
        return;
    ring_buffer__free(b->rb);
    triggers_bpf__destroy(b->skel);
    free(b);
}

int pfr_trig_bpf_new(bool oom, bool signals, pfr_trig_death_fn fn, void *ctx, pfr_trig_bpf **out,
                     char *err, size_t errlen)
{
    pfr_trig_bpf *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->fn = fn;
    b->ctx = ctx;
    int rc = 0;
    const char *step = "open";
    b->skel = triggers_bpf__open();
    if (!b->skel) {
        rc = -errno;
        goto fail;
    }
    bpf_program__set_autoload(b->skel->progs.pfr_trig_oom, oom);
    bpf_program__set_autoload(b->skel->progs.pfr_trig_exit, signals);
    step = "load";
    if ((rc = triggers_bpf__load(b->skel)))
        goto fail;
    step = "attach";
    /* the links go in the skeleton, whose destroy detaches and frees them */
    if (oom && !(b->skel->links.pfr_trig_oom = bpf_program__attach(b->skel->progs.pfr_trig_oom))) {
        rc = -errno;
        goto fail;
    }
    if (signals &&
        !(b->skel->links.pfr_trig_exit = bpf_program__attach(b->skel->progs.pfr_trig_exit))) {
        rc = -errno;
        goto fail;
    }
    step = "ring buffer";
    b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.trig_events), on_event, b, NULL);
    if (!b->rb) {
        rc = -errno;
        goto fail;
    }
    *out = b;
    return 0;
fail:
    if (rc == 0)
        rc = -EINVAL;
    snprintf(err, errlen, "the OOM and fatal-signal triggers' BPF program: %s failed: %s", step,
             strerror(-rc));
    pfr_trig_bpf_free(b);
    return rc;
}

int pfr_trig_bpf_fd(pfr_trig_bpf *b)
{
    return ring_buffer__epoll_fd(b->rb);
}

int pfr_trig_bpf_consume(pfr_trig_bpf *b)
{
    return ring_buffer__consume(b->rb);
}

uint64_t pfr_trig_bpf_lost(pfr_trig_bpf *b)
{
    return b->skel->bss->trig_lost;
}
