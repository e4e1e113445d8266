/* Units of the attach client and the recording's commands: what /proc says, the protocol's
 * bytes, the JVM's replies, the jcmd lines, and the removal of files through a child. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "hotspot_attach.h"
#include "jfr_session.h"
#include "pfr_clock.h"

#define S(lit) lit, sizeof(lit) - 1

static void status_fields(void **state)
{
    (void)state;
    pfr_jvm j = {0};
    const char t[] = "Name:\tjava\nUid:\t1000\t1001\t1002\t1003\nGid:\t20\t21\t22\t23\n"
                     "NSpid:\t4242\t17\t1\nSigCgt:\t0000000181005ccf\n";
    assert_int_equal(pfr_hotspot_parse_status(S(t), &j), 0);
    assert_int_equal(j.nspid, 1);
    assert_int_equal(j.uid, 1001); /* effective */
    assert_int_equal(j.gid, 21);
    assert_true(j.sigquit_caught); /* bit 3 - 1 of 0x...cf */
    const char noquit[] =
        "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNSpid:\t9\nSigCgt:\t0000000000000002\n";
    assert_int_equal(pfr_hotspot_parse_status(S(noquit), &j), 0);
    assert_int_equal(j.nspid, 9);
    assert_false(j.sigquit_caught);
    /* no NSpid (a kernel before 4.1), a bad number, a cut line: refused */
    assert_int_equal(pfr_hotspot_parse_status(S("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"), &j),
                     -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_status(S("NSpid:\t1x\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
                                                "SigCgt:\t0\n"),
                                              &j),
                     -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_status(S("NSpid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
                                                "SigCgt:\t4\n"),
                                              &j),
                     -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_status(S("NSpid:\t5\nUid:\t0\t0\nGid:\t0\t0\t0\t0\n"
                                                "SigCgt:\t4\n"),
                                              &j),
                     -EBADMSG);
}

static void maps_and_flags(void **state)
{
    (void)state;
    const char m[] = "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                     "7f20-7f30 r-xp 00000000 08:01 13 /usr/lib/jvm/java-17/lib/server/"
                     "libjvm.so\n";
    assert_true(pfr_hotspot_maps_have_libjvm(S(m)));
    assert_true(pfr_hotspot_maps_have_libjvm(S("1-2 r-xp 0 0:0 1 /x/libjvm.so (deleted)")));
    assert_false(pfr_hotspot_maps_have_libjvm(S("1-2 r-xp 0 0:0 1 /x/libjvm.so.bak\n")));
    assert_false(pfr_hotspot_maps_have_libjvm(S("1-2 r-xp 0 0:0 1 /x/libj9vm29.so\n")));
    assert_false(pfr_hotspot_maps_have_libjvm(S("1-2 r-xp 0 0:0 1 /x/notlibjvm.so\n")));

    const char cl[] = "java\0-XX:+DisableAttachMechanism\0-cp\0.\0Main";
    assert_true(pfr_hotspot_cmdline_flag(S(cl), "DisableAttachMechanism"));
    assert_false(pfr_hotspot_cmdline_flag(S(cl), "PreserveFramePointer"));
    const char off[] = "java\0-XX:+PreserveFramePointer\0-XX:-PreserveFramePointer\0Main";
    assert_false(pfr_hotspot_cmdline_flag(S(off), "PreserveFramePointer"));
    /* a program argument that merely contains the text is not the flag */
    const char arg[] = "java\0Main\0x-XX:+DisableAttachMechanism";
    assert_false(pfr_hotspot_cmdline_flag(S(arg), "DisableAttachMechanism"));
}

/* The test program is no JVM; its own status reads back, and a wrong start time is another
 * process. */
static void probe_self(void **state)
{
    (void)state;
    pfr_jvm j;
    assert_int_equal(pfr_hotspot_probe(NULL, getpid(), &j), -ENOENT);
    assert_int_equal(pfr_hotspot_probe(NULL, 0x7ffffff0, &j), -ESRCH);
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')') + 2; /* field 3 */
    for (int field = 3; field < 22; field++)
        p = strchr(p, ' ') + 1;
    pfr_jvm me = {.pid = getpid(),
                  .nspid = getpid(),
                  .uid = geteuid(),
                  .gid = getegid(),
                  .start_time = strtoull(p, NULL, 10)};
    assert_int_equal(pfr_hotspot_refresh(NULL, &me), 0);
    pfr_jvm other = me;
    other.start_time++;
    assert_int_equal(pfr_hotspot_refresh(NULL, &other), -ESTALE);
}

static void request_bytes(void **state)
{
    (void)state;
    char b[4096];
    int n = pfr_hotspot_request(b, sizeof(b), "jcmd", "JFR.check", NULL, NULL);
    assert_int_equal(n, 2 + 5 + 10 + 1 + 1);
    assert_memory_equal(b, "1\0jcmd\0JFR.check\0\0", (size_t)n);
    char big[PFR_HOTSPOT_ARG_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(pfr_hotspot_request(b, sizeof(b), "jcmd", big, NULL, NULL), -ENAMETOOLONG);
    big[PFR_HOTSPOT_ARG_MAX] = '\0'; /* exactly the limit */
    assert_true(pfr_hotspot_request(b, sizeof(b), "jcmd", big, NULL, NULL) > 0);
    assert_int_equal(pfr_hotspot_request(b, sizeof(b), "", "x", NULL, NULL), -ENAMETOOLONG);
    assert_int_equal(pfr_hotspot_request(b, 8, "jcmd", "JFR.check", NULL, NULL), -ENOSPC);
}

static void replies(void **state)
{
    (void)state;
    int st = 99;
    size_t body = 0;
    assert_int_equal(pfr_hotspot_parse_reply(S("0\nDone\n"), &st, &body), 0);
    assert_int_equal(st, 0);
    assert_int_equal(body, 2);
    assert_int_equal(pfr_hotspot_parse_reply(S("-1\nOperation x not recognized!"), &st, &body), 0);
    assert_int_equal(st, -1);
    assert_int_equal(body, 3);
    assert_int_equal(pfr_hotspot_parse_reply(S("0"), &st, &body), -EBADMSG); /* cut */
    assert_int_equal(pfr_hotspot_parse_reply(S(""), &st, &body), -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_reply(S("-\n"), &st, &body), -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_reply(S("HTTP/1.1 200\n"), &st, &body), -EBADMSG);
    assert_int_equal(pfr_hotspot_parse_reply(S("12345678901234\n"), &st, &body), -EBADMSG);
}

static void names(void **state)
{
    (void)state;
    char b[32];
    assert_int_equal(pfr_hotspot_socket_name(b, sizeof(b), 4194304), 0);
    assert_string_equal(b, ".java_pid4194304");
    assert_int_equal(pfr_hotspot_trigger_name(b, sizeof(b), 1), 0);
    assert_string_equal(b, ".attach_pid1");
    assert_int_equal(pfr_hotspot_trigger_name(b, 8, 1), -ENOSPC);
}

static void jcmd_lines(void **state)
{
    (void)state;
    char b[PFR_HOTSPOT_ARG_MAX + 1];
    int n = pfr_jfr_start_line(b, sizeof(b), 86);
    assert_true(n > 0 && n <= PFR_HOTSPOT_ARG_MAX);
    assert_non_null(strstr(b, "JFR.start name=" PFR_JFR_RECORDING " settings=none maxage=86s"));
    assert_non_null(strstr(b, "+jdk.ExecutionSample#period=10ms"));
    assert_non_null(strstr(b, "+jdk.JavaMonitorEnter#threshold="));
    assert_int_equal(pfr_jfr_start_line(b, 40, 86), -ENOSPC);
    /* 2026-11-29T13:19:14.000000123Z */
    n = pfr_jfr_dump_line(b, sizeof(b), "/tmp/x.jfr", 1795958354000000123LL);
    assert_true(n > 0);
    assert_string_equal(b, "JFR.dump name=" PFR_JFR_RECORDING
                           " filename=/tmp/x.jfr begin=2026-11-29T13:19:14.000000123Z");
    pfr_jfr_dump_line(b, sizeof(b), "/tmp/x.jfr", 0);
    assert_string_equal(b, "JFR.dump name=" PFR_JFR_RECORDING " filename=/tmp/x.jfr");
}

static void check_output(void **state)
{
    (void)state;
    unsigned n;
    bool has;
    const char o[] = "Recording 1: name=mine maxsize=250.0MB (running)\n\n"
                     "Recording 3: name=pfr-recorder maxage=66s (running)\n";
    pfr_jfr_check_parse(S(o), PFR_JFR_RECORDING, &n, &has);
    assert_int_equal(n, 2);
    assert_true(has);
    const char p[] = "Recording 1: name=pfr-recorder-x (running)\n";
    pfr_jfr_check_parse(S(p), PFR_JFR_RECORDING, &n, &has);
    assert_int_equal(n, 1);
    assert_false(has);
    pfr_jfr_check_parse(S("No available recordings.\n"), PFR_JFR_RECORDING, &n, &has);
    assert_int_equal(n, 0);
    assert_false(has);
}

/* The removal runs in a child with the JVM's credentials (here: ours); a name with a '/' is
 * refused before any child. */
static void unlink_child(void **state)
{
    (void)state;
    char dir[] = "/tmp/pfr-java-unit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/a.jfr", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    int dfd = open(dir, O_PATH | O_DIRECTORY);
    pfr_jvm me = {.pid = getpid(), .nspid = getpid(), .uid = geteuid(), .gid = getegid()};
    const char *bad[] = {"../etc/passwd"};
    int64_t dl = pfr_clock_mono_ns() + 5000000000LL;
    assert_int_equal(pfr_hotspot_unlink(&me, dfd, bad, 1, dl, NULL), -EINVAL);
    const char *ok[] = {"a.jfr", "gone.jfr"};
    assert_int_equal(pfr_hotspot_unlink(&me, dfd, ok, 2, dl, NULL), 0);
    assert_int_equal(access(path, F_OK), -1);
    close(dfd);
    rmdir(dir);
}

/* No listener and no trigger allowed: refused at once, no signal sent. */
static void run_without_listener(void **state)
{
    (void)state;
    char dir[] = "/tmp/pfr-java-unit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_PATH | O_DIRECTORY);
    pfr_jvm me = {.pid = getpid(), .nspid = 999999, .uid = geteuid(), .gid = getegid()};
    char out[64];
    size_t len;
    int rc = pfr_hotspot_run(&me, dfd, false, "jcmd", "JFR.check",
                             pfr_clock_mono_ns() + 2000000000LL, out, sizeof(out), &len, NULL);
    assert_int_equal(rc, -ECONNREFUSED);
    /* a socket name that is a regular file (the JVM's user made it): refused, not followed */
    int f = openat(dfd, ".java_pid999999", O_CREAT | O_WRONLY, 0600);
    close(f);
    rc = pfr_hotspot_run(&me, dfd, false, "jcmd", "JFR.check", pfr_clock_mono_ns() + 2000000000LL,
                         out, sizeof(out), &len, NULL);
    assert_int_equal(rc, -EPERM);
    unlinkat(dfd, ".java_pid999999", 0);
    close(dfd);
    rmdir(dir);
}

/* ---- a fake attach listener: the JVM's side of one command, hostile when asked ---- */

enum fake_file { FAKE_REGULAR, FAKE_SYMLINK, FAKE_FIFO, FAKE_BIG, FAKE_NONE };

struct fake {
    int lsock, dfd;
    const char *reply; /* after the request; NULL: close without a word */
    enum fake_file file;
    char name[64];
    char request[2048];
    size_t reqlen;
};

static void *fake_serve(void *arg)
{
    struct fake *f = arg;
    int c = accept(f->lsock, NULL, NULL);
    if (c < 0)
        return NULL;
    /* the request: "1", the command and three arguments, each NUL-terminated */
    int nuls = 0;
    while (nuls < 5 && f->reqlen < sizeof(f->request)) {
        ssize_t r = read(c, f->request + f->reqlen, 1);
        if (r <= 0)
            break;
        nuls += f->request[f->reqlen++] == '\0';
    }
    char big[2000];
    memset(big, 'x', sizeof(big));
    int fd;
    switch (f->file) {
    case FAKE_REGULAR:
    case FAKE_BIG:
        fd = openat(f->dfd, f->name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (write(fd, big, f->file == FAKE_BIG ? sizeof(big) : 100) < 0)
            abort();
        close(fd);
        break;
    case FAKE_SYMLINK:
        symlinkat("/etc/passwd", f->dfd, f->name);
        break;
    case FAKE_FIFO:
        mkfifoat(f->dfd, f->name, 0644);
        break;
    case FAKE_NONE:
        break;
    }
    if (f->reply && write(c, f->reply, strlen(f->reply)) < 0)
        abort();
    close(c);
    return NULL;
}

/* One dump against the fake listener; the session's file is gone afterwards whatever it was. */
static int fake_dump(const char *reply, enum fake_file file, bool *still_recording, size_t *len)
{
    char dir[] = "/tmp/pfr-java-unit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pfr_jfr_session s;
    memset(&s, 0, sizeof(s));
    s.jvm = (pfr_jvm){.pid = getpid(), .nspid = 424242, .uid = geteuid(), .gid = getegid()};
    s.tmp_fd = open(dir, O_PATH | O_DIRECTORY);
    s.max_bytes = 1024;
    s.recording = true;
    struct fake f = {.dfd = open(dir, O_DIRECTORY), .reply = reply, .file = file};
    snprintf(f.name, sizeof(f.name), "pfr-jfr-424242-1.jfr");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.java_pid424242", dir);
    f.lsock = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(f.lsock, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f.lsock, 1), 0);
    pthread_t t;
    pthread_create(&t, NULL, fake_serve, &f);
    uint8_t *buf = NULL;
    int rc = pfr_jfr_session_dump(&s, 0, pfr_clock_mono_ns() + 5000000000LL, &buf, len);
    pthread_join(t, NULL);
    assert_memory_equal(f.request, "1\0jcmd\0JFR.dump name=pfr-recorder filename=/tmp/",
                        sizeof("1\0jcmd\0JFR.dump name=pfr-recorder filename=/tmp/") - 1);
    assert_true(rc == 0 ? buf != NULL : buf == NULL);
    free(buf);
    assert_int_equal(faccessat(f.dfd, f.name, F_OK, AT_SYMLINK_NOFOLLOW), -1);
    *still_recording = s.recording;
    close(f.lsock);
    unlinkat(f.dfd, ".java_pid424242", 0);
    close(f.dfd);
    pfr_jfr_session_close(&s);
    assert_int_equal(rmdir(dir), 0);
    return rc;
}

static void hostile_dumps(void **state)
{
    (void)state;
    const char *ok = "0\nDumped recording \"pfr-recorder\", 0.1 kB written to:\n\n/tmp/x\n";
    bool rec;
    size_t len = 0;
    assert_int_equal(fake_dump(ok, FAKE_REGULAR, &rec, &len), 0);
    assert_int_equal(len, 100);
    /* what the JVM's user may put in its /tmp: never followed, never blocks, bounded */
    assert_int_equal(fake_dump(ok, FAKE_SYMLINK, &rec, &len), -EBADMSG);
    assert_int_equal(fake_dump(ok, FAKE_FIFO, &rec, &len), -EBADMSG);
    assert_int_equal(fake_dump(ok, FAKE_BIG, &rec, &len), -EFBIG);
    assert_int_equal(fake_dump(ok, FAKE_NONE, &rec, &len), -ENOENT);
    assert_true(rec);
    /* someone stopped pfr's recording: started again at the next round */
    assert_int_equal(fake_dump("0\nCould not find pfr-recorder.\n", FAKE_NONE, &rec, &len),
                     -ENOENT);
    assert_false(rec);
    assert_int_equal(fake_dump("garbage", FAKE_REGULAR, &rec, &len), -EBADMSG);
    assert_int_equal(fake_dump("-1\njava.lang.Exception\n", FAKE_NONE, &rec, &len), -EPROTO);
    assert_int_equal(fake_dump(NULL, FAKE_NONE, &rec, &len), -EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_fields),  cmocka_unit_test(probe_self),
        cmocka_unit_test(maps_and_flags), cmocka_unit_test(request_bytes),
        cmocka_unit_test(replies),        cmocka_unit_test(names),
        cmocka_unit_test(jcmd_lines),     cmocka_unit_test(check_output),
        cmocka_unit_test(unlink_child),   cmocka_unit_test(run_without_listener),
        cmocka_unit_test(hostile_dumps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
