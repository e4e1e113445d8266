/*
 * hotspot_attach: HotSpot JVMs found on the host and driven through HotSpot's dynamic attach
 * protocol (docs/java.md, "Attaching"), with no jcmd binary and no agent.
 *
 * The protocol: a client creates `.attach_pid<nspid>` in the JVM's /tmp (nspid: the JVM's pid
 * in its own pid namespace), sends it SIGQUIT, and the JVM starts its attach listener on the
 * UNIX socket `/tmp/.java_pid<nspid>` in its mount namespace. Each command is one connection:
 * the client writes "1\0<cmd>\0<arg1>\0<arg2>\0<arg3>\0", the JVM answers a status line
 * ("0\n": done) and the command's output, then closes.
 *
 * HotSpot 17 accepts a client whose effective uid is root or whose effective uid and gid are
 * the JVM's (SO_PEERCRED), and the socket is 0600: so the steps that touch the JVM (the trigger
 * file, the signal, connect, removing the JVM's files) run in a short-lived child process that
 * takes the JVM's credentials; the daemon's own threads never change theirs (docs/java.md,
 * "Security"). Everything in the JVM's /tmp is reached through directory descriptors opened
 * under /proc/PID/root (never a path the JVM's user could turn into a symbolic link out of its
 * root), and every wait has a deadline: a hung JVM costs its deadline, never a stuck thread.
 *
 * Functions return 0 or a negative errno; none prints.
 */
#ifndef PFR_RECORDER_JAVA_HOTSPOT_ATTACH_H
#define PFR_RECORDER_JAVA_HOTSPOT_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pfr_fsguard;

/* The attach protocol's limits (HotSpot 17: attachListener.hpp). */
#define PFR_HOTSPOT_NAME_MAX 16   /* a command's name */
#define PFR_HOTSPOT_ARG_MAX  1024 /* each argument */

/* What /proc says of a process, for attaching. */
typedef struct pfr_jvm {
    pid_t pid;            /* in the recorder's pid namespace */
    pid_t nspid;          /* in its own (innermost) pid namespace: the JVM's names use it */
    uid_t uid;            /* effective, as the recorder's user namespace sees it */
    gid_t gid;            /* effective */
    uint64_t start_time;  /* /proc/PID/stat field 22: tells a reused pid apart */
    bool sigquit_caught;  /* a SIGQUIT handler is installed (else SIGQUIT would kill it) */
    bool attach_disabled; /* -XX:+DisableAttachMechanism on its command line */
    bool frame_pointers;  /* -XX:+PreserveFramePointer on its command line */
} pfr_jvm;

/* ---- what /proc says (pure parsers, unit-tested and fuzzed) ---- */

/* From the text of /proc/PID/status: the last NSpid field, the effective uid and gid (second
 * fields of Uid and Gid) and whether SigCgt has SIGQUIT. 0 or -EBADMSG. */
int pfr_hotspot_parse_status(const char *text, size_t len, pfr_jvm *out);

/* Whether the text of /proc/PID/maps maps a file named libjvm.so (HotSpot's library; OpenJ9's
 * is libj9vm). */
bool pfr_hotspot_maps_have_libjvm(const char *text, size_t len);

/* Whether the NUL-separated command line (len bytes) holds the argument arg exactly (the last
 * of a +/- pair wins: "-XX:+F" and then "-XX:-F" is off). flag: the name after "-XX:+", e.g.
 * "DisableAttachMechanism". */
bool pfr_hotspot_cmdline_flag(const char *cmdline, size_t len, const char *flag);

/* Read what the recorder needs of pid under proc_root (NULL = "/proc"). 0; -ENOENT when it is
 * no HotSpot JVM; -ESRCH when gone; or a negative errno. */
int pfr_hotspot_probe(const char *proc_root, pid_t pid, pfr_jvm *out);

/* For a JVM found before: read its status and start time again (not its maps). 0; -ESTALE
 * when the pid is another process now; -ESRCH when gone; or a negative errno. */
int pfr_hotspot_refresh(const char *proc_root, pfr_jvm *jvm);

/* ---- the protocol ---- */

/* The request bytes for cmd with up to three arguments (NULL = ""): "1\0cmd\0a1\0a2\0a3\0".
 * Returns its length, or -ENAMETOOLONG (a name or argument past the protocol's limits) or
 * -ENOSPC (cap too small). */
int pfr_hotspot_request(char *buf, size_t cap, const char *cmd, const char *arg1, const char *arg2,
                        const char *arg3);

/* The JVM's reply (len bytes, not NUL-terminated): the status line's value into *status and
 * where the output starts into *body. 0, or -EBADMSG when the first line is not an integer
 * ending in '\n' (a reply cut before its status line, or no HotSpot listener). */
int pfr_hotspot_parse_reply(const char *buf, size_t len, int *status, size_t *body);

/* The names in the JVM's /tmp: ".java_pid<nspid>" and ".attach_pid<nspid>". -ENOSPC if cap is
 * too small. */
int pfr_hotspot_socket_name(char *buf, size_t cap, pid_t nspid);
int pfr_hotspot_trigger_name(char *buf, size_t cap, pid_t nspid);

/* ---- a JVM's /tmp and the commands ---- */

/* An O_PATH descriptor of the JVM's /tmp: /proc/PID/root then "/tmp" without crossing a mount
 * or following a link past its mount point, and only on a local file system (fsguard may be
 * NULL in tests: any). -EREMOTE, -ENOTDIR, -errno. */
int pfr_hotspot_open_tmp(struct pfr_fsguard *fsguard, const char *proc_root, pid_t pid);

typedef struct pfr_attach_stats {
    uint64_t triggers;            /* .attach_pid files made and SIGQUITs sent */
    uint64_t credential_switches; /* children that took a JVM's credentials */
} pfr_attach_stats;

/* Run one command: connect to the JVM's listener (starting it first when its socket is not
 * there yet and may_trigger), write the request, read the reply until the JVM closes, at most
 * cap bytes into out (*outlen; a longer reply is cut and is -EMSGSIZE). deadline_ns:
 * CLOCK_MONOTONIC. Returns 0 (parse the reply with pfr_hotspot_parse_reply), -ETIMEDOUT (the
 * JVM did not start its listener or answer in time), -ECONNREFUSED (no listener: a stale
 * socket, or attach disabled), -EPERM (the JVM's credentials could not be taken: a recorder
 * without CAP_SETUID/CAP_SETGID), -ESRCH (it exited), -errno. */
int pfr_hotspot_run(const pfr_jvm *jvm, int tmp_fd, bool may_trigger, const char *cmd,
                    const char *arg1, int64_t deadline_ns, char *out, size_t cap, size_t *outlen,
                    pfr_attach_stats *st);

/* Remove files of the JVM's /tmp (names relative to tmp_fd, no '/'), as the JVM's user: /tmp
 * is sticky, only the owner may. Files already gone count as removed. 0, or the first error. */
int pfr_hotspot_unlink(const pfr_jvm *jvm, int tmp_fd, const char *const *names, size_t n,
                       int64_t deadline_ns, pfr_attach_stats *st);

#endif
