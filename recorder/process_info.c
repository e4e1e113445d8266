/* Process records: creation from kernel notifications and /proc, service naming, removal. */
#include "process_info.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pfr_proc_table_init(pfr_proc_table *t, const char *proc_root)
{
    memset(t, 0, sizeof(*t));
    t->proc_root = strdup(proc_root ? proc_root : "/proc");
    return t->proc_root ? 0 : -ENOMEM;
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
    while (pfr_u64map_next(&t->by_tgid, &pos, &k, &v))
        proc_free((pfr_proc *)(uintptr_t)v);
    pfr_u64map_free(&t->by_tgid);
    free(t->proc_root);
    t->proc_root = NULL;
}

size_t pfr_proc_table_size(const pfr_proc_table *t)
{
    return t->by_tgid.n;
}

pfr_proc *pfr_proc_table_get(const pfr_proc_table *t, uint32_t tgid)
{
    uint64_t *v = pfr_u64map_get(&t->by_tgid, tgid);
    return v ? (pfr_proc *)(uintptr_t)*v : NULL;
}

static ssize_t read_text(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
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

int pfr_process_read_facts(const char *proc_root, uint32_t tgid, char *exe, size_t exelen,
                           char *cgroup, size_t cgrouplen, char *comm, size_t commlen,
                           bool *kthread)
{
    char path[256];
    char buf[4096];
    exe[0] = cgroup[0] = '\0';
    if (commlen)
        comm[0] = '\0';

    snprintf(path, sizeof(path), "%s/%u/cgroup", proc_root, tgid);
    ssize_t n = read_text(path, buf, sizeof(buf));
    if (n == -ENOENT || n == -ESRCH)
        return -ESRCH;
    if (n > 0)
        pfr_cgroup_from_proc_text(buf, cgroup, cgrouplen);

    snprintf(path, sizeof(path), "%s/%u/exe", proc_root, tgid);
    ssize_t l = readlink(path, exe, exelen - 1);
    if (l > 0) {
        exe[l] = '\0';
        /* a replaced binary reads "/path (deleted)": keep the path */
        static const char del[] = " (deleted)";
        size_t el = (size_t)l, dl = sizeof(del) - 1;
        if (el > dl && strcmp(exe + el - dl, del) == 0)
            exe[el - dl] = '\0';
    } else {
        exe[0] = '\0';
    }
    if (commlen) {
        snprintf(path, sizeof(path), "%s/%u/comm", proc_root, tgid);
        if (read_text(path, buf, sizeof(buf)) > 0) {
            buf[strcspn(buf, "\n")] = '\0';
            snprintf(comm, commlen, "%s", buf);
        }
    }
    if (kthread) {
        snprintf(path, sizeof(path), "%s/%u/stat", proc_root, tgid);
        *kthread = read_text(path, buf, sizeof(buf)) > 0 && pfr_stat_is_kthread(buf);
    }
    return 0;
}

static void name_it(pfr_proc *p, const pfr_service_rules *rules)
{
    pfr_process_facts f = {
        .comm = p->comm, .exe = p->exe, .cgroup = p->cgroup, .kthread = p->kthread};
    pfr_service_name(rules, &f, p->service, sizeof(p->service), p->container_id);
}

static void replace_str(char **dst, const char *src)
{
    free(*dst);
    *dst = src && src[0] ? strdup(src) : NULL;
}

void pfr_proc_refresh(pfr_proc_table *t, pfr_proc *p, const char *comm,
                      const pfr_service_rules *rules)
{
    if (comm && comm[0])
        snprintf(p->comm, sizeof(p->comm), "%s", comm);
    if (!p->kthread) {
        char exe[4096], cgroup[4096], now[16];
        if (pfr_process_read_facts(t->proc_root, p->tgid, exe, sizeof(exe), cgroup, sizeof(cgroup),
                                   now, sizeof(now), NULL) == 0) {
            replace_str(&p->exe, exe);
            replace_str(&p->cgroup, cgroup);
            /* what /proc says now beats what a notification said earlier (the process may have
             * called exec since, its notification still queued) */
            if (now[0])
                snprintf(p->comm, sizeof(p->comm), "%s", now);
        }
    }
    name_it(p, rules);
}

pfr_proc *pfr_proc_table_learn(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                               const char *comm, bool kthread, const pfr_service_rules *rules)
{
    pfr_proc *p = pfr_proc_table_get(t, tgid);
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
        if (pfr_u64map_put(&t->by_tgid, tgid, (uint64_t)(uintptr_t)p)) {
            free(p);
            return NULL;
        }
        t->created++;
    } else {
        /* a new process reusing the tgid: start over */
        free(p->exe);
        free(p->cgroup);
        memset(p, 0, sizeof(*p));
    }
    p->tgid = tgid;
    p->start_time = start_time;
    p->kthread = kthread;
    snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
    pfr_proc_refresh(t, p, NULL, rules);
    return p;
}

void pfr_proc_table_remove(pfr_proc_table *t, uint32_t tgid)
{
    pfr_proc *p = pfr_proc_table_get(t, tgid);
    if (!p)
        return;
    pfr_u64map_del(&t->by_tgid, tgid);
    proc_free(p);
    t->forgotten++;
}
