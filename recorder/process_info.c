/* Process records: creation from kernel notifications and /proc, service naming, removal. */
#include "process_info.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "naming.h"
#include "pfr_read_small.h"

/* cgroups a host has in use at once are far fewer; past this the cache starts over */
#define CGROUP_CACHE_MAX 4096

const char *pfr_cgroup2_mount(void)
{
    static const char *const where[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
        struct statfs sf;
        if (statfs(where[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
            return where[i];
    }
    return NULL;
}

int pfr_proc_table_init(pfr_proc_table *t, const char *proc_root)
{
    memset(t, 0, sizeof(*t));
    t->proc_root = strdup(proc_root ? proc_root : "/proc");
    if (!t->proc_root)
        return -ENOMEM;
    /* the host's cgroup mount goes with the host's /proc only */
    const char *cg = strcmp(t->proc_root, "/proc") == 0 ? pfr_cgroup2_mount() : NULL;
    if (cg && !(t->cgroup_root = strdup(cg))) {
        free(t->proc_root);
        t->proc_root = NULL;
        return -ENOMEM;
    }
    return 0;
}

static void cgroups_clear(pfr_map *m)
{
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(m, &pos, &k, &v))
        free((char *)(uintptr_t)v);
    pfr_map_clear(m);
}

static const char *cgroup_cached(const pfr_proc_table *t, uint64_t id)
{
    uint64_t *v = id ? pfr_map_get(&t->cgroups, id) : NULL;
    return v ? (const char *)(uintptr_t)*v : NULL;
}

/* Is dir (under the cgroup v2 mount) the cgroup whose id is id (its inode number)? */
static bool cgroup_dir_is(const pfr_proc_table *t, const char *path, uint64_t id)
{
    char dir[PATH_MAX];
    struct stat st;
    return t->cgroup_root && id && path[0] == '/' &&
           snprintf(dir, sizeof(dir), "%s%s", t->cgroup_root, path) < (int)sizeof(dir) &&
           stat(dir, &st) == 0 && (uint64_t)st.st_ino == id;
}

/* Does a cgroup v2 id alone tell which path the agent's rule picks, as the process's
 * /proc/PID/cgroup picked path (has_v1: that text had cgroup v1 lines)? Only if it is checked
 * against the cgroup's directory (a process moved to another cgroup after its notification is
 * not cached under a wrong id), and:
 * - on a cgroup v2 only host, always: the v2 path is all the text says ("" stands for "/" and
 *   "/init.scope", which the rule passes over);
 * - with v1 hierarchies, only when the rule took the v2 path itself. Where it passed over a v2
 *   "/" or "/init.scope" for a v1 path (a hybrid host whose v2 tree is empty, a v1-only one),
 *   processes of one v2 cgroup may be in many v1 ones: each has its own text read. */
static bool cgroup_id_decides(const pfr_proc_table *t, uint64_t id, const char *path, bool has_v1)
{
    if (path[0])
        return cgroup_dir_is(t, path, id);
    return !has_v1 && (cgroup_dir_is(t, "/", id) || cgroup_dir_is(t, "/init.scope", id));
}

/* Remember path as cgroup id's. */
static void cgroup_remember(pfr_proc_table *t, uint64_t id, const char *path)
{
    if (t->cgroups.n >= CGROUP_CACHE_MAX)
        cgroups_clear(&t->cgroups);
    char *copy = strdup(path);
    if (copy && pfr_map_put(&t->cgroups, id, (uint64_t)(uintptr_t)copy) != 0)
        free(copy);
}

/* Directories visited at most to find a cgroup by id: a bound on the walk for a host with very
 * many cgroups (the walk is for processes gone before /proc could name them). */
#define CGROUP_WALK_MAX 20000

/* Depth-first search of dir (fd, path rel) for the cgroup whose directory inode is id (cgroup v2
 * ids are kernfs inode numbers, which readdir gives without a stat). */
static bool cgroup_walk(int fd, char *rel, size_t len, size_t cap, uint64_t id, int *budget)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL && --*budget > 0) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        size_t nl = strlen(e->d_name);
        if (len + 1 + nl + 1 > cap)
            continue;
        rel[len] = '/';
        memcpy(rel + len + 1, e->d_name, nl + 1);
        if ((uint64_t)e->d_ino == id) {
            closedir(d);
            return true;
        }
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub >= 0)
            found = cgroup_walk(sub, rel, len + 1 + nl, cap, id, budget);
        if (!found)
            rel[len] = '\0';
    }
    closedir(d);
    return found;
}

/* The path of cgroup id under the cgroup v2 mount, found by walking it; false if not found. */
static bool cgroup_find(const pfr_proc_table *t, uint64_t id, char *out, size_t outlen)
{
    if (!t->cgroup_root || !id || outlen < 2)
        return false;
    int fd = open(t->cgroup_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_ino == id) {
        close(fd);
        snprintf(out, outlen, "/");
        return true;
    }
    int budget = CGROUP_WALK_MAX;
    out[0] = '\0';
    return cgroup_walk(fd, out, 0, outlen, id, &budget);
}

static void proc_free(pfr_proc *p)
{
    if (!p)
        return;
    free(p->exe);
    free(p->cgroup);
    free(p);
}

void pfr_proc_table_free(pfr_proc_table *t)
{
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&t->by_tgid, &pos, &k, &v))
        proc_free((pfr_proc *)(uintptr_t)v);
    pfr_map_free(&t->by_tgid);
    cgroups_clear(&t->cgroups);
    pfr_map_free(&t->cgroups);
    free(t->proc_root);
    free(t->cgroup_root);
    t->proc_root = t->cgroup_root = NULL;
}

size_t pfr_proc_table_size(const pfr_proc_table *t)
{
    return t->by_tgid.n;
}

pfr_proc *pfr_proc_table_get(const pfr_proc_table *t, uint32_t tgid)
{
    uint64_t *v = pfr_map_get(&t->by_tgid, tgid);
    return v ? (pfr_proc *)(uintptr_t)*v : NULL;
}

bool pfr_stat_is_kthread(const char *stat_text)
{
    /* "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold ')' */
    const char *p = strrchr(stat_text, ')');
    if (!p)
        return false;
    p++;
    for (int field = 3; field <= 9; field++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return false;
        if (field == 9)
            return (strtoull(p, NULL, 10) & 0x00200000ull) != 0; /* PF_KTHREAD */
        while (*p && *p != ' ')
            p++;
    }
    return false;
}

/* exe gets the executable's path ("" if unreadable); with check_gone, -ESRCH if the process is
 * gone (nothing else read tells). */
static int read_exe(const char *proc_root, uint32_t tgid, char *exe, size_t exelen, bool check_gone)
{
    char path[256];
    exe[0] = '\0';
    snprintf(path, sizeof(path), "%s/%u/exe", proc_root, tgid);
    ssize_t l = readlink(path, exe, exelen - 1);
    if (l < 0 && check_gone && errno == ENOENT) {
        /* no exe: a kernel thread, or a process that is gone */
        snprintf(path, sizeof(path), "%s/%u", proc_root, tgid);
        if (access(path, F_OK) != 0)
            return -ESRCH;
    }
    if (l <= 0)
        return 0;
    exe[l] = '\0';
    /* a replaced binary reads "/path (deleted)": keep the path */
    static const char del[] = " (deleted)";
    size_t el = (size_t)l, dl = sizeof(del) - 1;
    if (el > dl && strcmp(exe + el - dl, del) == 0)
        exe[el - dl] = '\0';
    return 0;
}

/* pfr_process_read_facts, also telling whether the cgroup text had cgroup v1 lines. */
static int read_facts(const char *proc_root, uint32_t tgid, char *exe, size_t exelen, char *cgroup,
                      size_t cgrouplen, char *comm, size_t commlen, bool *kthread, bool *has_v1)
{
    char path[256];
    char buf[4096];
    if (exelen)
        exe[0] = '\0';
    if (cgrouplen)
        cgroup[0] = '\0';
    if (commlen)
        comm[0] = '\0';
    *has_v1 = false;

    if (cgrouplen) {
        snprintf(path, sizeof(path), "%s/%u/cgroup", proc_root, tgid);
        ssize_t n = pfr_read_small(path, buf, sizeof(buf));
        if (n == -ENOENT || n == -ESRCH)
            return -ESRCH;
        if (n > 0) {
            /* the node agent's rule, so a process is named as the agent would name it on
             * every kind of host (a path too long for cgroup is none: a plain process) */
            pfr_identity_cgroup_from_proc(buf, (size_t)n, cgroup, cgrouplen);
            *has_v1 = pfr_identity_proc_has_v1(buf, (size_t)n);
        }
    }

    if (exelen) {
        int rc = read_exe(proc_root, tgid, exe, exelen, cgrouplen == 0);
        if (rc)
            return rc;
    }
    if (commlen) {
        snprintf(path, sizeof(path), "%s/%u/comm", proc_root, tgid);
        if (pfr_read_small(path, buf, sizeof(buf)) > 0) {
            buf[strcspn(buf, "\n")] = '\0';
            snprintf(comm, commlen, "%s", buf);
        }
    }
    if (kthread) {
        snprintf(path, sizeof(path), "%s/%u/stat", proc_root, tgid);
        *kthread = pfr_read_small(path, buf, sizeof(buf)) > 0 && pfr_stat_is_kthread(buf);
    }
    return 0;
}

int pfr_process_read_facts(const char *proc_root, uint32_t tgid, char *exe, size_t exelen,
                           char *cgroup, size_t cgrouplen, char *comm, size_t commlen,
                           bool *kthread)
{
    bool has_v1;
    return read_facts(proc_root, tgid, exe, exelen, cgroup, cgrouplen, comm, commlen, kthread,
                      &has_v1);
}

static void name_it(pfr_proc_table *t, pfr_proc *p, const pfr_service_rules *rules)
{
    pfr_process_facts f = {
        .comm = p->comm, .exe = p->exe, .cgroup = p->cgroup, .kthread = p->kthread};
    bool was = p->naming_pending;
    p->naming_pending = pfr_name_process(t->identity, rules, &f, (int)p->tgid, p->service,
                                         sizeof(p->service), p->container_id);
    t->naming_pending += (size_t)p->naming_pending - (size_t)was;
}

size_t pfr_proc_table_rename_pending(pfr_proc_table *t, const pfr_service_rules *rules)
{
    if (t->naming_pending == 0)
        return 0;
    size_t pos = 0, renamed = 0;
    uint64_t k, v;
    while (pfr_map_next(&t->by_tgid, &pos, &k, &v)) {
        pfr_proc *p = (pfr_proc *)(uintptr_t)v;
        if (!p->naming_pending)
            continue;
        name_it(t, p, rules);
        renamed += !p->naming_pending;
    }
    return renamed;
}

static void replace_str(char **dst, const char *src)
{
    free(*dst);
    *dst = src && src[0] ? strdup(src) : NULL;
}

/* Whether the process (alive) refuses profiling, from its environment: read by the caller's
 * thread, which is never one that writes intervals or handles signals (the CPU source's
 * notification and collector threads). Unreadable (gone, a kernel thread): it does not. */
static void read_consent(pfr_proc_table *t, pfr_proc *p)
{
    bool off = false, was = p->opted_out;
    if (!p->kthread)
        pfr_identity_consent_read(t->proc_root, (int)p->tgid, PFR_CONSENT_ENVIRON_MAX, &off);
    p->opted_out = off;
    t->opted_out += off && !was; /* a process, not each exec of one */
}

/* comm, if given, is the name until /proc says otherwise; with trust_comm /proc is not asked.
 * consent: read the environment's consent too (a new process, an exec). */
static void refresh(pfr_proc_table *t, pfr_proc *p, const char *comm, bool trust_comm,
                    uint64_t cgroup_id, const char *known_exe, bool consent,
                    const pfr_service_rules *rules)
{
    bool have_comm = comm && comm[0];
    if (have_comm)
        snprintf(p->comm, sizeof(p->comm), "%s", comm);
    if (!p->kthread) {
        char exe[4096], cgroup[4096], now[16];
        const char *known = cgroup_cached(t, cgroup_id);
        bool ask_comm = !(trust_comm && have_comm);
        bool ask_exe = !(known_exe && known_exe[0]);
        bool has_v1;
        int rc =
            read_facts(t->proc_root, p->tgid, exe, ask_exe ? sizeof(exe) : 0, cgroup,
                       known ? 0 : sizeof(cgroup), now, ask_comm ? sizeof(now) : 0, NULL, &has_v1);
        if (!ask_exe) {
            replace_str(&p->exe, known_exe);
            t->exe_hits++;
        } else if (rc == 0) {
            replace_str(&p->exe, exe);
            t->exe_reads++;
        }
        if (known) {
            /* even for a process already gone: its cgroup still names its service */
            replace_str(&p->cgroup, known);
            t->cgroup_hits++;
        } else if (rc == 0) {
            replace_str(&p->cgroup, cgroup);
            t->cgroup_reads++;
            if (cgroup_id_decides(t, cgroup_id, cgroup, has_v1))
                cgroup_remember(t, cgroup_id, cgroup);
        } else if (cgroup_find(t, cgroup_id, cgroup, sizeof(cgroup))) {
            /* gone, and its cgroup not met before: the cgroup itself usually still exists. Its
             * v2 path is all there is; "/" and "/init.scope" are not remembered, for on a host
             * with v1 hierarchies the processes of those are told apart by their v1 paths. */
            replace_str(&p->cgroup, cgroup);
            t->cgroup_walks++;
            if (strcmp(cgroup, "/") != 0 && strcmp(cgroup, "/init.scope") != 0)
                cgroup_remember(t, cgroup_id, cgroup);
        }
        /* what /proc says now beats what a notification said earlier (the process may have
         * called exec since, its notification still queued) */
        if (rc == 0 && ask_comm && now[0])
            snprintf(p->comm, sizeof(p->comm), "%s", now);
        if (consent && rc == 0)
            read_consent(t, p);
    }
    name_it(t, p, rules);
}

void pfr_proc_refresh(pfr_proc_table *t, pfr_proc *p, const char *comm,
                      const pfr_service_rules *rules)
{
    refresh(t, p, comm, false, 0, NULL, false, rules);
}

void pfr_proc_refresh_hinted(pfr_proc_table *t, pfr_proc *p, const pfr_proc_hint *hint,
                             const pfr_service_rules *rules)
{
    refresh(t, p, hint ? hint->comm : NULL, true, hint ? hint->cgroup_id : 0,
            hint ? hint->exe : NULL, true, rules);
}

/* The record of tgid, new or reset (a new process reusing the tgid); NULL if out of memory. */
static pfr_proc *fresh_record(pfr_proc_table *t, uint32_t tgid)
{
    pfr_proc *p = pfr_proc_table_get(t, tgid);
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
        if (pfr_map_put(&t->by_tgid, tgid, (uint64_t)(uintptr_t)p)) {
            free(p);
            return NULL;
        }
        t->created++;
    } else {
        t->naming_pending -= p->naming_pending;
        free(p->exe);
        free(p->cgroup);
        memset(p, 0, sizeof(*p));
    }
    p->tgid = tgid;
    return p;
}

pfr_proc *pfr_proc_table_learn(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                               const char *comm, bool kthread, const pfr_service_rules *rules)
{
    pfr_proc *p = fresh_record(t, tgid);
    if (!p)
        return NULL;
    p->start_time = start_time;
    p->kthread = kthread;
    snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
    refresh(t, p, NULL, false, 0, NULL, true, rules);
    return p;
}

pfr_proc *pfr_proc_table_learn_hinted(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                                      bool kthread, const pfr_proc_hint *hint,
                                      const pfr_service_rules *rules)
{
    pfr_proc *p = fresh_record(t, tgid);
    if (!p)
        return NULL;
    p->start_time = start_time;
    p->kthread = kthread;
    pfr_proc_refresh_hinted(t, p, hint, rules);
    return p;
}

void pfr_proc_table_remove(pfr_proc_table *t, uint32_t tgid)
{
    pfr_proc *p = pfr_proc_table_get(t, tgid);
    if (!p)
        return;
    pfr_map_del(&t->by_tgid, tgid);
    t->naming_pending -= p->naming_pending;
    proc_free(p);
    t->forgotten++;
}
