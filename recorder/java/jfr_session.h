/*
 * jfr_session: pfr's own Flight Recorder recording in one JVM (docs/java.md, "Recording"),
 * through hotspot_attach: started once with pfr's event settings, dumped every interval into a
 * file of the JVM's /tmp that pfr reads (safely: the JVM's user owns that directory) and
 * removes, stopped when the recorder stops or the setting is turned off. Recordings of others
 * (the JVM's own, an operator's) are never touched.
 *
 * One session per JVM, used by one thread. Functions return 0 or a negative errno with a reason
 * in the session's err; none prints.
 */
#ifndef PFR_RECORDER_JAVA_JFR_SESSION_H
#define PFR_RECORDER_JAVA_JFR_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotspot_attach.h"

/* The name of pfr's recording in every JVM: a recorder that restarts after a crash finds (and
 * stops) the one it left. */
#define PFR_JFR_RECORDING "pfr-recorder"
/* What one execution sample stands for: the period pfr asks for. */
#define PFR_JFR_CPU_PERIOD_NS 10000000LL

typedef struct pfr_jfr_session {
    pfr_jvm jvm;
    int tmp_fd;      /* O_PATH, the JVM's /tmp; owned */
    bool recording;  /* pfr's recording runs */
    unsigned others; /* recordings of others JFR.check listed when pfr's started */
    uint64_t seq;    /* dumps made: each file has a name of its own */
    /* dumps whose file may still appear (the JVM wrote it after pfr gave up, or its removal
     * failed): removed again at each dump and at the stop; the oldest forgotten past 8 */
    uint64_t stale[8];
    unsigned nstale;
    size_t max_bytes; /* a larger dump is refused */
    int64_t maxage_s; /* the JVM keeps this much of pfr's recording on its disk */
    pfr_attach_stats attach;
    int64_t dump_ns; /* time spent in the last dump (command, read, removal) */
    char err[256];
} pfr_jfr_session;

/* The pure parts (unit-tested): */

/* The JFR.start arguments (one jcmd line) with pfr's settings; maxage_s bounds what the JVM
 * keeps. Returns the length or -ENOSPC. */
int pfr_jfr_start_line(char *buf, size_t cap, int64_t maxage_s);
/* The JFR.dump line for the file name (in the JVM's view) from unix time begin_ns (0: all). */
int pfr_jfr_dump_line(char *buf, size_t cap, const char *path, int64_t begin_ns);
/* From JFR.check's output: how many recordings it lists, and whether one is named name. */
void pfr_jfr_check_parse(const char *out, size_t len, const char *name, unsigned *count,
                         bool *has_name);

/* Open the JVM's /tmp; nothing is sent yet. 0 or -errno. */
int pfr_jfr_session_open(pfr_jfr_session *s, struct pfr_fsguard *fsguard, const char *proc_root,
                         const pfr_jvm *jvm, size_t max_bytes, int64_t maxage_s);
/* Attach (starting the JVM's listener if needed), check Flight Recorder is there, stop a
 * recording of pfr's name left by an earlier recorder, start pfr's. -ENOTSUP: no Flight
 * Recorder (the reason in err); other errors as pfr_hotspot_run. */
int pfr_jfr_session_start(pfr_jfr_session *s, int64_t deadline_ns);
/* Dump what was recorded from begin_ns (unix ns) on, read the file into *buf (malloc'd, the
 * caller's), remove it. -EFBIG past max_bytes; -EBADMSG a file that is no regular file of the
 * JVM's user (a link, a FIFO, someone else's). */
int pfr_jfr_session_dump(pfr_jfr_session *s, int64_t begin_ns, int64_t deadline_ns, uint8_t **buf,
                         size_t *len);
/* Ask the JVM for /tmp/perf-<nspid>.map (Compiler.perfmap, JDK 17+). */
int pfr_jfr_session_perfmap(pfr_jfr_session *s, int64_t deadline_ns);
/* Stop pfr's recording (if it runs) and remove pfr's files. */
int pfr_jfr_session_stop(pfr_jfr_session *s, int64_t deadline_ns);
/* Close the descriptors (does not talk to the JVM). */
void pfr_jfr_session_close(pfr_jfr_session *s);

#endif
