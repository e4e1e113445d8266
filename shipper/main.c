/* pfr-shipper: moves what the ring holds to Coroot or ClickHouse, oldest first, with batching,
 * retries and backfill, keeping its own state. Reads the ring read-only. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "engine.h"
#include "http.h"
#include "pfr_clock.h"
#include "pfr_log.h"
#include "pfr_store.h"
#include "sinks/sinks.h"
#include "state.h"
#include "status.h"

#define EXIT_TEMPFAIL    75 /* sysexits' EX_TEMPFAIL: try again later */
#define EXIT_SINK_FAILED 69 /* sysexits' EX_UNAVAILABLE: a sink took nothing, and said why */

/* The daemon's top level: the signals that stop it, blocked and waited for. */
struct runctx {
    sigset_t stop_set;
    bool stop;
    int signo;
};

static bool should_stop(void *ctx)
{
    struct runctx *r = ctx;
    if (r->stop)
        return true;
    sigset_t p;
    if (sigpending(&p) == 0) {
        for (int s = 1; s < NSIG; s++) {
            if (sigismember(&r->stop_set, s) == 1 && sigismember(&p, s) == 1) {
                r->stop = true;
                r->signo = s;
            }
        }
    }
    return r->stop;
}

static void sleep_ns(void *ctx, int64_t ns)
{
    struct runctx *r = ctx;
    if (ns <= 0 || r->stop)
        return;
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    siginfo_t si;
    int s = sigtimedwait(&r->stop_set, &si, &ts);
    if (s > 0) {
        r->stop = true;
        r->signo = s;
    }
}

/* One daemon per state file: two would send the same chunks under different batches. The lock
 * is the file "<state>.lock", held (flock) while the process lives. */
static int lock_state(const char *state_path)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s.lock", state_path) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    return fd; /* kept open until exit */
}

/* ---- a ring slice (pfr export --ring): shipped by backfill alone, with a state of its own ----
 * The daemon's state names the ring it follows and the instance its tokens carry: a slice run
 * against it would make the daemon start its cursors over. A slice's state instead carries the
 * slice's id as its instance, so every run over the same slice (from any copy, any machine)
 * sends the same batches under the same tokens, and ClickHouse keeps each batch once. */

/* mkdir -p, mode for the folders it makes. */
static int make_dirs(const char *path, mode_t mode)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *q = p + 1;; q++) {
        if (*q && *q != '/')
            continue;
        char was = *q;
        *q = 0;
        if (mkdir(p, mode) != 0 && errno != EEXIST)
            return -errno;
        if (!was)
            return 0;
        *q = was;
    }
}

/* Where a slice's state goes when --state is not given: $XDG_STATE_HOME/pfr (default
 * ~/.local/state/pfr), one file per slice. */
static int slice_state_path(const pfr_slice_info *si, char **out)
{
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[4000];
    int n = xdg && xdg[0] == '/'     ? snprintf(dir, sizeof(dir), "%s/pfr", xdg)
            : home && home[0] == '/' ? snprintf(dir, sizeof(dir), "%s/.local/state/pfr", home)
                                     : -1;
    if (n < 0)
        return -ENOENT;
    if (n >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    int rc = make_dirs(dir, 0700);
    if (rc)
        return rc;
    return asprintf(out, "%s/slice-%016" PRIx64 ".db", dir, si->id) < 0 ? -ENOMEM : 0;
}

/* What a slice changes in the run: only backfill, its whole range by default, its own state.
 * Returns an exit code (0: go on). */
static int slice_setup(pfr_shipper_conf *c, pfr_store *store, pfr_slice_info *si)
{
    int rc = pfr_store_slice_info(store, si);
    if (rc) {
        pfr_err("ring %s: %s", c->store_path, strerror(-rc));
        return 1;
    }
    bool whole = c->cmd == PFR_CMD_BACKFILL && !c->from_ns && !c->to_ns;
    if (!si->is_slice) {
        if (!whole)
            return 0;
        pfr_err("backfill needs --from and --to (only a ring slice, made by pfr export --ring, "
                "is backfilled whole)");
        return 2;
    }
    if (c->cmd != PFR_CMD_BACKFILL) {
        pfr_err("%s is a ring slice (pfr export --ring): ship it with "
                "pfr-shipper backfill --store %s --sink NAME",
                c->store_path, c->store_path);
        return 2;
    }
    if (whole) {
        c->from_ns = si->from_ns;
        c->to_ns = si->to_ns;
    }
    if (!c->state_given) {
        char *p = NULL;
        if ((rc = slice_state_path(si, &p))) {
            pfr_err("no folder for the slice's state (%s): give --state FILE", strerror(-rc));
            return 1;
        }
        free(c->state_path);
        c->state_path = p;
    }
    pfr_info("%s is a ring slice (id %016" PRIx64 "); its state: %s", c->store_path, si->id,
             c->state_path);
    return 0;
}

/* Make the state the slice's (refusing one that belongs to a ring or another slice). */
static int slice_claim_state(pfr_state *state, const pfr_slice_info *si, const char *path)
{
    char id[24], old[64] = "";
    snprintf(id, sizeof(id), "%016" PRIx64, si->id);
    bool ring = false;
    int rc = pfr_state_meta_get(state, "slice", old, sizeof(old));
    if (rc == -ENOENT && (rc = pfr_state_meta_get(state, "ring", old, sizeof(old))) == 0)
        ring = old[0] != 0;
    if (rc && rc != -ENOENT) {
        pfr_err("state file %s: %s", path, strerror(-rc));
        return rc;
    }
    if (ring) {
        pfr_err("the state file %s belongs to a ring: give the slice a state of its own (--state "
                "FILE, or none for the default)",
                path);
        return -EEXIST;
    }
    if (rc == 0 && old[0] && strcmp(old, id)) {
        pfr_err("the state file %s belongs to another slice (%s)", path, old);
        return -EEXIST;
    }
    /* the ring identity cleared: a copy of the slice elsewhere is the same slice */
    if ((rc = pfr_state_meta_put(state, "slice", id)) ||
        (rc = pfr_state_meta_put(state, "instance", id)) ||
        (rc = pfr_state_meta_put(state, "ring", "")))
        pfr_err("state file %s: %s", path, strerror(-rc));
    return rc;
}

static int run(pfr_shipper_conf *c, struct runctx *rc_)
{
    char err[512];
    pfr_store *store = NULL;
    pfr_state *state = NULL;
    pfr_engine *eng = NULL;
    int code = 1, rc;
    if (c->cmd == PFR_CMD_RUN) {
        int fd = lock_state(c->state_path);
        if (fd < 0) {
            if (fd == -EBUSY)
                pfr_err("another pfr-shipper is running with the state file %s", c->state_path);
            else
                pfr_err("cannot lock %s.lock: %s", c->state_path, strerror(-fd));
            return 1;
        }
    }
    pfr_store_opts so = {.read_only = true, .cache_bytes = pfr_shipper_ring_cache(c)};
    if ((rc = pfr_store_open(c->store_path, &so, &store, err, sizeof(err)))) {
        pfr_err("ring %s: %s", c->store_path, err);
        goto out;
    }
    pfr_slice_info si;
    if ((code = slice_setup(c, store, &si)) != 0)
        goto out;
    code = 1;
    if ((rc = pfr_state_open(c->state_path, false, &state, err, sizeof(err)))) {
        pfr_err("%s", err);
        goto out;
    }
    if (si.is_slice && slice_claim_state(state, &si, c->state_path))
        goto out;
    pfr_engine_opts eo = {
        .store = store,
        .state = state,
        .store_path = c->store_path,
        .once = c->once || c->cmd == PFR_CMD_BACKFILL,
        .poll_ms = c->poll_ms,
        .progress_ms = c->cmd == PFR_CMD_BACKFILL ? c->progress_ms : 0,
        .sleep = sleep_ns,
        .should_stop = should_stop,
        .ctx = rc_,
        .seed = (uint64_t)pfr_clock_real_ns() ^ ((uint64_t)getpid() << 16),
    };
    if ((rc = pfr_engine_new(&eo, &eng, err, sizeof(err)))) {
        pfr_err("%s", err);
        goto out;
    }
    for (size_t i = 0; i < c->nsinks; i++) {
        pfr_sink_conf *s = &c->sinks[i];
        if (c->cmd == PFR_CMD_BACKFILL) {
            if (strcmp(s->name, c->backfill_sink))
                continue;
            rc = pfr_engine_add_lane(eng, s, PFR_LANE_BACKFILL, c->from_ns, c->to_ns, err,
                                     sizeof(err));
        } else {
            rc = 0;
            if (c->retry_rejected)
                rc = pfr_engine_add_lane(eng, s, PFR_LANE_REJECTED, 0, 0, err, sizeof(err));
            if (!rc)
                rc = pfr_engine_add_lane(eng, s, PFR_LANE_LIVE, 0, 0, err, sizeof(err));
        }
        if (rc) {
            pfr_err("%s", err);
            goto out;
        }
        char url[256];
        pfr_info("%s %s: %s %s", c->cmd == PFR_CMD_BACKFILL ? "backfill to" : "sink", s->name,
                 s->kind->name, pfr_url_redact(s->url, url, sizeof(url)));
        if (s->key_file_mode & (S_IRGRP | S_IROTH))
            pfr_warn("sink %s: the key file %s is readable by %s (mode %04o): chmod 600 it",
                     s->name, s->api_key_file,
                     s->key_file_mode & S_IROTH ? "everyone" : "its group", s->key_file_mode);
    }
    int64_t deadline = c->deadline_ms && (c->once || c->cmd == PFR_CMD_BACKFILL)
                           ? pfr_clock_mono_ns() + c->deadline_ms * 1000000
                           : 0;
    rc = pfr_engine_run(eng, deadline);
    switch (rc) {
    case PFR_RUN_DONE:
        code = 0;
        break;
    case PFR_RUN_STOPPED:
        pfr_info("stopping (signal %d)", rc_->signo);
        code = c->once || c->cmd == PFR_CMD_BACKFILL ? EXIT_TEMPFAIL : 0;
        break;
    case PFR_RUN_DEADLINE:
        pfr_warn("deadline reached with chunks left to ship");
        code = EXIT_TEMPFAIL;
        break;
    default:
        pfr_err("stopped by an error: %s", strerror(-rc));
        code = 1;
        break;
    }
    /* A cron job must see a sink that refused everything (a wrong key) as a failure, not as
     * "done" or "try later". */
    if ((rc == PFR_RUN_DONE || rc == PFR_RUN_DEADLINE) && (c->once || c->cmd == PFR_CMD_BACKFILL) &&
        pfr_engine_failed_sinks(eng))
        code = EXIT_SINK_FAILED;
out:
    pfr_engine_free(eng);
    pfr_state_close(state);
    pfr_store_close(store);
    return code;
}

int main(int argc, char **argv)
{
    pfr_shipper_conf c;
    char err[1024] = "";
    int rc = pfr_shipper_conf_load(&c, argc, argv, pfr_clock_real_ns(), stdout, err, sizeof(err));
    if (rc == PFR_CONF_EXIT) {
        pfr_shipper_conf_free(&c);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "pfr-shipper: %s\n", err);
        pfr_shipper_conf_free(&c);
        return 2;
    }
    pfr_log_set_level(c.log_level);
    if (c.cmd == PFR_CMD_STATUS) {
        rc = pfr_status_print(&c, stdout, err, sizeof(err));
        if (rc)
            fprintf(stderr, "pfr-shipper: %s\n", err[0] ? err : strerror(-rc));
        pfr_shipper_conf_free(&c);
        return rc ? 1 : 0;
    }
    struct runctx r = {0};
    sigemptyset(&r.stop_set);
    sigaddset(&r.stop_set, SIGTERM);
    sigaddset(&r.stop_set, SIGINT);
    sigaddset(&r.stop_set, SIGHUP);
    /* Blocked: they are waited for (sigtimedwait) and polled during transfers, so a stop never
     * lands in the middle of a state write. */
    sigprocmask(SIG_BLOCK, &r.stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "pfr-shipper: libcurl failed to start\n");
        pfr_shipper_conf_free(&c);
        return 1;
    }
    int code = run(&c, &r);
    curl_global_cleanup();
    pfr_shipper_conf_free(&c);
    return code;
}
