#include "exe_scan.h"
#include "pfr_fsguard.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfr_clock.h"

struct pfr_exe_scan {
    pthread_mutex_t lock;
    char *proc_root;
    pfr_exe_list last;
    int64_t taken_ns; /* monotonic; 0: none yet */
    uint64_t scans;
};

int pfr_exe_scan_new(const char *proc_root, pfr_exe_scan **out)
{
    pfr_exe_scan *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->proc_root = strdup(proc_root ? proc_root : "/proc");
    if (!s->proc_root) {
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

void pfr_exe_scan_free(pfr_exe_scan *s)
{
    if (!s)
        return;
    pfr_exe_list_free(&s->last);
    pthread_mutex_destroy(&s->lock);
    free(s->proc_root);
    free(s);
}

void pfr_exe_list_free(pfr_exe_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static bool pid_name(const char *name, pid_t *pid)
{
    if (!isdigit((unsigned char)name[0]))
        return false;
    char *end;
    errno = 0;
    long v = strtol(name, &end, 10);
    if (*end || errno || v <= 0 || v > INT_MAX)
        return false;
    *pid = (pid_t)v;
    return true;
}

static int scan(const char *proc_root, pfr_exe_list *out)
{
    DIR *d = opendir(proc_root);
    if (!d)
        return -errno;
    size_t cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        if (!pid_name(de->d_name, &pid))
            continue;
        /* relative to the open directory: one path component fewer to look up per process */
        char path[32];
        snprintf(path, sizeof(path), "%d/exe", (int)pid);
        struct stat st;
        /* the kernel's cached attributes: a hung FUSE or NFS server is never asked */
        if (pfr_fsguard_stat_cached(dirfd(d), path, &st) < 0)
            continue; /* gone, or a kernel thread */
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            pfr_exe *nv = realloc(out->v, ncap * sizeof(*nv));
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            out->v = nv;
            cap = ncap;
        }
        out->v[out->n++] = (pfr_exe){.pid = pid, .st = st};
    }
    closedir(d);
    return rc;
}

static int copy_list(const pfr_exe_list *from, pfr_exe_list *to)
{
    to->n = 0;
    to->v = NULL;
    if (from->n == 0)
        return 0;
    to->v = malloc(from->n * sizeof(*to->v));
    if (!to->v)
        return -ENOMEM;
    memcpy(to->v, from->v, from->n * sizeof(*to->v));
    to->n = from->n;
    return 0;
}

int pfr_exe_scan_get(pfr_exe_scan *s, int64_t max_age_ns, pfr_exe_list *out)
{
    out->v = NULL;
    out->n = 0;
    pthread_mutex_lock(&s->lock);
    int64_t now = pfr_clock_mono_ns();
    int rc = 0;
    if (s->taken_ns == 0 || max_age_ns <= 0 || now - s->taken_ns > max_age_ns) {
        pfr_exe_list fresh = {0};
        rc = scan(s->proc_root, &fresh);
        if (rc) {
            pfr_exe_list_free(&fresh);
        } else {
            pfr_exe_list_free(&s->last);
            s->last = fresh;
            s->taken_ns = now;
            s->scans++;
        }
    }
    if (!rc)
        rc = copy_list(&s->last, out);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

uint64_t pfr_exe_scan_count(pfr_exe_scan *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->scans;
    pthread_mutex_unlock(&s->lock);
    return n;
}
