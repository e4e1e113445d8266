/* Naming a process: its cgroup's Coroot identity, then the service rules. */
#include "naming.h"

#include <string.h>

/* Without a resolver: the ids a path gives by itself (systemd services, Talos). */
static void identity_from_path(const char *cgroup, pfr_identity_result *r)
{
    pfr_identity_cgroup c;
    memset(r, 0, sizeof(*r));
    pfr_identity_classify(cgroup, &c);
    if ((c.kind != PFR_IDENTITY_KIND_SYSTEMD && c.kind != PFR_IDENTITY_KIND_TALOS) || !c.id[0])
        return;
    memcpy(r->container_id, c.id, sizeof(r->container_id));
    if (pfr_identity_service_name(c.id, r->service, sizeof(r->service)) == 0)
        r->state = PFR_IDENTITY_RESOLVED;
}

bool pfr_name_process(pfr_identity *identity, const pfr_service_rules *rules,
                      const pfr_process_facts *f, int pid, char *service, size_t servicelen,
                      char *container_id)
{
    pfr_process_facts g = *f;
    pfr_identity_result r = {0};
    if (!f->kthread && f->cgroup && f->cgroup[0]) {
        if (identity)
            pfr_identity_lookup(identity, f->cgroup, pid, &r);
        else
            identity_from_path(f->cgroup, &r);
    }
    if (r.state == PFR_IDENTITY_RESOLVED && r.container_id[0]) {
        g.coroot_id = r.container_id;
        g.coroot_service = r.service;
    }
    pfr_service_name(rules, &g, service, servicelen, container_id);
    return r.state == PFR_IDENTITY_PENDING || r.state == PFR_IDENTITY_FAILED;
}
