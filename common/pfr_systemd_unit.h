/*
 * pfr_systemd_unit: a systemd unit's Type and TriggeredBy as systemd would load them from the
 * unit files on disk, for hosts where the live manager cannot be asked (no D-Bus, no systemd as
 * PID 1, or a process not allowed on its private socket). Coroot's node agent asks systemd over
 * D-Bus for the same two properties (containers/systemd.go); pfr_system_service_is judges them.
 *
 * What is read, in systemd's order (systemd.unit(5), "Unit File Load Path", system mode):
 * - the search path PFR_SYSTEMD_SEARCH_PATH (relative to a root directory, "/" on the host), the
 *   first directory that holds the unit's name winning; an instance with no file of its own
 *   ("getty@tty1.service") is made from its template ("getty@.service"); a unit file that is
 *   empty or a link to /dev/null is masked;
 * - drop-ins: the .conf files of <unit>.d/, of the template's <name>@.d/, of the name's dash
 *   prefixes ("foo-.service.d/" for foo-bar.service) and of the type's "service.d/", in every
 *   directory of the search path; for one file name the first directory in the search path
 *   wins (one linked to /dev/null or empty hides the others and adds nothing); all applied after
 *   the unit file in the lexical order of their file names;
 * - Type= of [Service]: the last value systemd knows wins (others are ignored, as systemd does);
 *   with none, BusName= makes it dbus, ExecStart= simple, neither oneshot (systemd's
 *   service_add_extras);
 * - TriggeredBy, timers only: a timer counts when it is enabled, i.e. linked (by its name) into
 *   a *.wants/ or *.requires/ directory of the search path (timers.target.wants/ mostly): those
 *   are the timers a booted manager has loaded. Its [Timer] Unit= (the first one that resolves,
 *   as systemd takes the first) names the unit it triggers, with %n %N %p %i %% expanded; with
 *   none, the unit of its own name with ".service" for ".timer".
 * Not read: what only the live manager knows (a timer started by hand and never enabled,
 * transient units' properties set over D-Bus, aliases' drop-ins), sockets and path units
 * (the agent only looks at ".timer").
 *
 * Strict reading, though unit files are root's: names are checked (unit characters, no "/"),
 * files are opened with openat2(RESOLVE_IN_ROOT) so that a link never leaves the root (plain
 * openat on kernels before 5.6) and the kernel stops link loops (ELOOP); only regular files of
 * at most PFR_SYSTEMD_FILE_MAX bytes are read, at most PFR_SYSTEMD_DROPINS_MAX drop-ins per unit,
 * PFR_SYSTEMD_DIR_ENTRIES_MAX entries per directory and PFR_SYSTEMD_TIMERS_MAX timers.
 * Not thread-safe per view; no global state.
 */
#ifndef PFR_SYSTEMD_UNIT_H
#define PFR_SYSTEMD_UNIT_H

#include <stdbool.h>
#include <stddef.h>

#define PFR_SYSTEMD_FILE_MAX        (64 * 1024) /* bytes of one unit file or drop-in */
#define PFR_SYSTEMD_DROPINS_MAX     64          /* drop-in files of one unit */
#define PFR_SYSTEMD_DIR_ENTRIES_MAX 4096        /* entries looked at in one directory */
#define PFR_SYSTEMD_TIMERS_MAX      1024        /* enabled timers of a view */
#define PFR_SYSTEMD_NAME_MAX        256         /* a unit name's bytes, NUL included */

/* The system manager's unit search path, most important first (systemd 252's lookup_paths_init
 * for the system manager; /lib for hosts whose /lib is not /usr/lib). */
#define PFR_SYSTEMD_SEARCH_PATH                                                                    \
    "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",        \
        "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",     \
        "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",           \
        "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system",         \
        "/run/systemd/generator.late"

/* One assignment of a unit file: its section (without brackets), key and value (both without
 * surrounding blanks). Return 0 to go on, anything else to stop the parse with that value. */
typedef int (*pfr_systemd_assign_fn)(const char *section, const char *key, const char *value,
                                     void *ctx);

/* Parse a unit file's text as systemd's config parser does: a line ends at '\n', '\r', "\r\n"
 * or a NUL byte; a line ending in an unescaped backslash goes on on the next (the backslash
 * becomes a blank; comment lines in between are skipped); lines starting with '#' or ';' (after
 * blanks) are comments, "[Section]" starts a section, "Key=Value" is an assignment; other lines,
 * and assignments before any section, are ignored (systemd warns).
 * @return 0, what fn returned, -EFBIG (len > PFR_SYSTEMD_FILE_MAX) or -ENOMEM. */
int pfr_systemd_unit_parse(const char *text, size_t len, pfr_systemd_assign_fn fn, void *ctx);

enum pfr_systemd_load {
    PFR_SYSTEMD_NOT_FOUND = 0, /* no file of that name (nor of its template) */
    PFR_SYSTEMD_LOADED,
    PFR_SYSTEMD_MASKED, /* empty, or linked to /dev/null */
};

typedef struct pfr_systemd_props {
    enum pfr_systemd_load load;
    char type[16];                           /* a loaded service's Type, else "" */
    char triggered_by[PFR_SYSTEMD_NAME_MAX]; /* an enabled timer that triggers it, else "" */
} pfr_systemd_props;

/* A view of one root's unit files: its search directories and enabled timers as they were
 * when it was opened. */
typedef struct pfr_systemd pfr_systemd;

/* Open a view of the unit files under root ("/" on the host; a test's fixture tree). Missing
 * search directories are fine (none at all: every unit is not found). @return 0, -ENOMEM, or
 * the errno of opening root. */
int pfr_systemd_open(const char *root, pfr_systemd **out);
void pfr_systemd_close(pfr_systemd *sd);

/* How many enabled timers the view holds (those whose triggered unit was resolved). */
size_t pfr_systemd_timers(const pfr_systemd *sd);

/* Whether name is a unit name pfr reads: unit characters ([A-Za-z0-9:_.@\-\\]), at most
 * PFR_SYSTEMD_NAME_MAX - 1 bytes, a "<name>.<type>" form with a non-empty name. */
bool pfr_systemd_name_ok(const char *name);

/* The properties of unit (a full name, "apt-daily.service"). A unit that is not a service has
 * no Type. @return 0 (out filled, NOT_FOUND included), -EINVAL (not a unit name), -E2BIG (more
 * drop-ins than PFR_SYSTEMD_DROPINS_MAX), -EFBIG (a file too big), -ENOMEM, or the errno of a
 * read that failed; out is zeroed (NOT_FOUND) on error. */
int pfr_systemd_unit_props(const pfr_systemd *sd, const char *unit, pfr_systemd_props *out);

#endif
