/* pfr_systemd_unit: the unit-file parser, then units loaded from fixture trees (one temporary
 * root per test) as systemd would load them, judged by the node agent's rule
 * (pfr_system_service_is); the bounds; and this host's own Debian unit files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_system_service.h"
#include "pfr_systemd_unit.h"

/* ---- the parser ---- */

struct seen {
    char text[2048];
};

static int record(const char *section, const char *key, const char *value, void *ctx)
{
    struct seen *s = ctx;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof(s->text) - n, "[%s]%s=%s|", section, key, value);
    return 0;
}

static int stop_at_d(const char *section, const char *key, const char *value, void *ctx)
{
    (void)section, (void)value, (void)ctx;
    assert_string_not_equal(key, "e");
    return strcmp(key, "d") ? 0 : 7;
}

static void parse_expect(const char *text, const char *want)
{
    struct seen s = {{0}};
    assert_int_equal(pfr_systemd_unit_parse(text, strlen(text), record, &s), 0);
    assert_string_equal(s.text, want);
}

static void test_parse(void **state)
{
    (void)state;
    parse_expect("[Service]\nType=oneshot\n", "[Service]Type=oneshot|");
    /* blanks around keys and values, comments, lines without '=', CRLF */
    parse_expect("# c\n[Unit]\r\n ; c\n  Description =  a b  \r\nnonsense\n[Service]\nType=dbus",
                 "[Unit]Description=a b|[Service]Type=dbus|");
    /* assignments before any section are ignored; a broken header matches no section */
    parse_expect("Type=oneshot\n[Service\nType=dbus\n[Service]\nType=simple\n",
                 "[\n]Type=dbus|[Service]Type=simple|");
    /* continuations, with a comment line inside, and one at the end of the text */
    parse_expect("[Service]\nExecStart=/bin/a \\\n# inside\n  --b \\\n --c\nType=exec\\",
                 "[Service]ExecStart=/bin/a    --b   --c|[Service]Type=exec|");
    /* a value holding '=' */
    parse_expect("[Service]\nEnvironment=A=B\n", "[Service]Environment=A=B|");
    /* a NUL ends a line, as a line break does */
    struct seen s = {{0}};
    static const char nul[] = "[Service]\nType=one\0shot\nBusName=x\n";
    assert_int_equal(pfr_systemd_unit_parse(nul, sizeof(nul) - 1, record, &s), 0);
    assert_string_equal(s.text, "[Service]Type=one|[Service]BusName=x|");
    /* too big, and the callback's stop */
    assert_int_equal(pfr_systemd_unit_parse("", PFR_SYSTEMD_FILE_MAX + 1, record, &s), -EFBIG);
    assert_int_equal(pfr_systemd_unit_parse("[A]\nb=c\nd=e\n", 14, stop_at_d, &s), 7);
}

/* ---- fixture trees ---- */

struct tree {
    char root[PATH_MAX];
};

static void put(const struct tree *t, const char *rel, const char *text)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", t->root, rel);
    for (char *p = path + strlen(t->root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        (void)mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void link_to(const struct tree *t, const char *rel, const char *target)
{
    char path[PATH_MAX * 2];
    put(t, rel, "");
    snprintf(path, sizeof(path), "%s/%s", t->root, rel);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(target, path), 0);
}

static int tree_setup(void **state)
{
    struct tree *t = calloc(1, sizeof(*t));
    snprintf(t->root, sizeof(t->root), "%s/pfr-units-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(t->root))
        return -1;
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    struct tree *t = *state;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
    int rc = system(cmd);
    free(t);
    return rc == 0 ? 0 : -1;
}

/* The props of unit in t's tree (a view opened now). */
static pfr_systemd_props props(const struct tree *t, const char *unit)
{
    pfr_systemd *sd;
    assert_int_equal(pfr_systemd_open(t->root, &sd), 0);
    pfr_systemd_props p;
    assert_int_equal(pfr_systemd_unit_props(sd, unit, &p), 0);
    pfr_systemd_close(sd);
    return p;
}

static bool system_service(const struct tree *t, const char *unit)
{
    pfr_systemd_props p = props(t, unit);
    return pfr_system_service_is(unit, p.type, p.triggered_by, "");
}

#define LIB "lib/systemd/system/"
#define ETC "etc/systemd/system/"
#define RUN "run/systemd/system/"

static void test_types(void **state)
{
    struct tree *t = *state;
    put(t, LIB "one.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n");
    put(t, LIB "bus.service", "[Service]\nType=dbus\nBusName=a.b\nExecStart=/bin/d\n");
    put(t, LIB "busname.service", "[Service]\nBusName=org.example.X\nExecStart=/bin/x\n");
    put(t, LIB "busname-simple.service", "[Service]\nType=simple\nBusName=a.b\nExecStart=/x\n");
    put(t, LIB "plain.service", "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/x\n");
    put(t, LIB "noexec.service", "[Service]\nExecStop=/bin/x\n");
    put(t, LIB "reset.service", "[Service]\nExecStart=/bin/x\nExecStart=\n");
    put(t, LIB "bogus.service", "[Service]\nType=forking\nType=bogus\nType=\nExecStart=/x\n");
    put(t, LIB "other-section.service", "[Unit]\nType=oneshot\n[Service]\nExecStart=/x\n");
    assert_string_equal(props(t, "one.service").type, "oneshot");
    assert_string_equal(props(t, "bus.service").type, "dbus");
    assert_string_equal(props(t, "busname.service").type, "dbus"); /* BusName=, no Type= */
    assert_string_equal(props(t, "busname-simple.service").type, "simple");
    assert_string_equal(props(t, "plain.service").type, "simple");
    assert_string_equal(props(t, "noexec.service").type, "oneshot"); /* no ExecStart= */
    assert_string_equal(props(t, "reset.service").type, "oneshot");  /* ExecStart= cleared */
    assert_string_equal(props(t, "bogus.service").type, "forking");  /* unknown ones ignored */
    assert_string_equal(props(t, "other-section.service").type, "simple");
    assert_true(system_service(t, "one.service"));
    assert_true(system_service(t, "busname.service"));
    assert_false(system_service(t, "plain.service"));
    assert_false(system_service(t, "busname-simple.service"));
    assert_int_equal(props(t, "one.service").load, PFR_SYSTEMD_LOADED);
}

static void test_missing_and_not_services(void **state)
{
    struct tree *t = *state;
    put(t, LIB "a.socket", "[Socket]\nListenStream=1\n");
    pfr_systemd_props p = props(t, "nope.service");
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND);
    assert_string_equal(p.type, "");
    assert_string_equal(p.triggered_by, "");
    assert_false(system_service(t, "nope.service"));
    p = props(t, "a.socket");
    assert_int_equal(p.load, PFR_SYSTEMD_LOADED);
    assert_string_equal(p.type, ""); /* only services have a Type */
    /* the slice a templated unit's Coroot id names */
    assert_false(system_service(t, "system-foo.slice"));
}

static void test_search_order(void **state)
{
    struct tree *t = *state;
    put(t, LIB "x.service", "[Service]\nType=oneshot\n");
    put(t, "usr/lib/systemd/system/x.service", "[Service]\nType=dbus\n");
    put(t, RUN "x.service", "[Service]\nType=forking\nExecStart=/x\n");
    assert_string_equal(props(t, "x.service").type, "forking"); /* /run before /lib */
    put(t, ETC "x.service", "[Service]\nExecStart=/x\n");
    assert_string_equal(props(t, "x.service").type, "simple"); /* /etc before /run */
    put(t, "usr/lib/systemd/system/y.service", "[Service]\nType=notify\n");
    assert_string_equal(props(t, "y.service").type, "notify"); /* /usr/lib alone */
    /* a link in /etc to a file elsewhere (absolute, resolved inside the root) */
    put(t, "opt/z.service", "[Service]\nType=oneshot\n");
    link_to(t, ETC "z.service", "/opt/z.service");
    assert_string_equal(props(t, "z.service").type, "oneshot");
}

static void test_dropins(void **state)
{
    struct tree *t = *state;
    put(t, LIB "d.service", "[Service]\nType=oneshot\nExecStart=/x\n");
    put(t, ETC "d.service.d/20-simple.conf", "[Service]\nType=simple\n");
    assert_string_equal(props(t, "d.service").type, "simple");
    /* lexical order of file names, whatever their directory: /lib's 30 after /etc's 20 */
    put(t, LIB "d.service.d/30-forking.conf", "[Service]\nType=forking\n");
    assert_string_equal(props(t, "d.service").type, "forking");
    /* one file name: /etc's hides /run's, which hides /lib's */
    put(t, RUN "d.service.d/30-forking.conf", "[Service]\nType=notify\n");
    assert_string_equal(props(t, "d.service").type, "notify");
    put(t, ETC "d.service.d/30-forking.conf", "[Service]\nType=idle\n");
    assert_string_equal(props(t, "d.service").type, "idle");
    /* masked by a link to /dev/null: only the 20 left */
    link_to(t, ETC "d.service.d/30-forking.conf", "/dev/null");
    assert_string_equal(props(t, "d.service").type, "simple");
    /* not .conf: not a drop-in */
    put(t, ETC "d.service.d/40.conf.bak", "[Service]\nType=dbus\n");
    assert_string_equal(props(t, "d.service").type, "simple");
    /* a BusName= from a drop-in makes a service without Type= dbus */
    put(t, LIB "e.service", "[Service]\nExecStart=/x\n");
    put(t, ETC "e.service.d/bus.conf", "[Service]\nBusName=a.b\n");
    assert_string_equal(props(t, "e.service").type, "dbus");
    /* dash prefixes and the type's own drop-ins, the most specific winning a file name */
    put(t, LIB "foo-bar-baz.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "foo-.service.d/10.conf", "[Service]\nType=oneshot\n");
    assert_string_equal(props(t, "foo-bar-baz.service").type, "oneshot");
    put(t, LIB "foo-bar-.service.d/10.conf", "[Service]\nType=forking\n");
    assert_string_equal(props(t, "foo-bar-baz.service").type, "forking");
    put(t, LIB "service.d/05.conf", "[Service]\nType=notify\n");
    put(t, LIB "plain.service", "[Service]\nExecStart=/x\n");
    assert_string_equal(props(t, "plain.service").type, "notify");
    assert_string_equal(props(t, "foo-bar-baz.service").type, "forking");
}

static void test_templates(void **state)
{
    struct tree *t = *state;
    put(t, LIB "getty@.service", "[Service]\nType=idle\nExecStart=/sbin/agetty\n");
    pfr_systemd_props p = props(t, "getty@tty1.service");
    assert_int_equal(p.load, PFR_SYSTEMD_LOADED);
    assert_string_equal(p.type, "idle");
    /* an instance's own file wins over the template */
    put(t, LIB "getty@tty2.service", "[Service]\nType=simple\nExecStart=/x\n");
    assert_string_equal(props(t, "getty@tty2.service").type, "simple");
    /* the template's drop-ins apply to its instances; the instance's come after by name */
    put(t, ETC "getty@.service.d/10.conf", "[Service]\nType=oneshot\n");
    assert_string_equal(props(t, "getty@tty1.service").type, "oneshot");
    put(t, ETC "getty@tty1.service.d/20.conf", "[Service]\nType=forking\n");
    assert_string_equal(props(t, "getty@tty1.service").type, "forking");
    assert_string_equal(props(t, "getty@tty3.service").type, "oneshot");
    /* the template itself is no instance of anything; no template: not found */
    assert_int_equal(props(t, "nothing@x.service").load, PFR_SYSTEMD_NOT_FOUND);
}

static void test_masked(void **state)
{
    struct tree *t = *state;
    put(t, LIB "m.service", "[Service]\nType=oneshot\n");
    link_to(t, ETC "m.service", "/dev/null");
    pfr_systemd_props p = props(t, "m.service");
    assert_int_equal(p.load, PFR_SYSTEMD_MASKED);
    assert_string_equal(p.type, "");
    assert_false(system_service(t, "m.service"));
    put(t, ETC "empty.service", "");
    put(t, LIB "empty.service", "[Service]\nType=oneshot\n");
    assert_int_equal(props(t, "empty.service").load, PFR_SYSTEMD_MASKED);
    /* a masked template masks its instances without files of their own */
    put(t, LIB "t@.service", "[Service]\nType=oneshot\n");
    link_to(t, ETC "t@.service", "/dev/null");
    assert_int_equal(props(t, "t@a.service").load, PFR_SYSTEMD_MASKED);
}

static void test_timers(void **state)
{
    struct tree *t = *state;
    /* Unit= names another service; enabled by a link in /etc's timers.target.wants */
    put(t, LIB "work.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "clock.timer", "[Timer]\nOnCalendar=daily\nUnit=work.service\n");
    link_to(t, ETC "timers.target.wants/clock.timer", "/lib/systemd/system/clock.timer");
    /* a timer of the same name; enabled in /lib's (static) and by *.requires */
    put(t, LIB "daily.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "daily.timer", "[Timer]\nOnCalendar=daily\n");
    link_to(t, LIB "timers.target.wants/daily.timer", "../daily.timer");
    put(t, LIB "weekly.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "weekly.timer", "[Timer]\nOnCalendar=weekly\n");
    link_to(t, ETC "multi-user.target.requires/weekly.timer", "/lib/systemd/system/weekly.timer");
    /* not enabled: systemd has not loaded it */
    put(t, LIB "idle.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "idle.timer", "[Timer]\nOnCalendar=daily\n");
    /* enabled but masked */
    put(t, LIB "gone.service", "[Service]\nExecStart=/x\n");
    put(t, LIB "gone.timer", "[Timer]\nOnCalendar=daily\n");
    link_to(t, ETC "timers.target.wants/gone.timer", "/lib/systemd/system/gone.timer");
    link_to(t, ETC "gone.timer", "/dev/null");
    /* specifiers, a template timer's instance, a drop-in's Unit=, the first Unit= winning */
    put(t, LIB "job@.timer", "[Timer]\nOnCalendar=daily\nUnit=run-%i.service\n");
    link_to(t, ETC "timers.target.wants/job@nightly.timer", "/lib/systemd/system/job@.timer");
    put(t, LIB "dropped.timer", "[Timer]\nOnCalendar=daily\n");
    put(t, ETC "dropped.timer.d/unit.conf", "[Timer]\nUnit=%p-real.service\nUnit=no.service\n");
    link_to(t, ETC "timers.target.wants/dropped.timer", "/lib/systemd/system/dropped.timer");

    pfr_systemd *sd;
    assert_int_equal(pfr_systemd_open(t->root, &sd), 0);
    assert_int_equal(pfr_systemd_timers(sd), 5);
    pfr_systemd_close(sd);
    assert_string_equal(props(t, "work.service").triggered_by, "clock.timer");
    assert_string_equal(props(t, "clock.service").triggered_by, ""); /* Unit= elsewhere */
    assert_string_equal(props(t, "daily.service").triggered_by, "daily.timer");
    assert_string_equal(props(t, "weekly.service").triggered_by, "weekly.timer");
    assert_string_equal(props(t, "idle.service").triggered_by, "");
    assert_string_equal(props(t, "gone.service").triggered_by, "");
    assert_string_equal(props(t, "run-nightly.service").triggered_by, "job@nightly.timer");
    assert_string_equal(props(t, "dropped-real.service").triggered_by, "dropped.timer");
    assert_true(system_service(t, "work.service"));
    assert_true(system_service(t, "daily.service"));
    assert_false(system_service(t, "idle.service"));
}

static void test_bounds(void **state)
{
    struct tree *t = *state;
    pfr_systemd *sd;
    pfr_systemd_props p;
    /* names that are not units' */
    assert_int_equal(pfr_systemd_open(t->root, &sd), 0);
    const char *bad[] = {"",          "../x.service", "a/b.service", "x",
                         "x.nottype", ".service",     "a b.service"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pfr_systemd_unit_props(sd, bad[i], &p), -EINVAL);
    char longname[PFR_SYSTEMD_NAME_MAX + 8];
    memset(longname, 'a', sizeof(longname));
    strcpy(longname + PFR_SYSTEMD_NAME_MAX - 4, ".service");
    assert_int_equal(pfr_systemd_unit_props(sd, longname, &p), -EINVAL);
    pfr_systemd_close(sd);
    /* a file too big */
    char *big = malloc(PFR_SYSTEMD_FILE_MAX + 2);
    memset(big, '#', PFR_SYSTEMD_FILE_MAX + 1);
    big[PFR_SYSTEMD_FILE_MAX + 1] = '\0';
    put(t, LIB "big.service", big);
    free(big);
    /* too many drop-ins */
    put(t, LIB "many.service", "[Service]\nExecStart=/x\n");
    for (int i = 0; i <= PFR_SYSTEMD_DROPINS_MAX; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), ETC "many.service.d/%03d.conf", i);
        put(t, rel, "[Service]\nType=simple\n");
    }
    /* a link loop, a link out of the root, a FIFO, a directory */
    link_to(t, ETC "loop.service", "/etc/systemd/system/loop2.service");
    link_to(t, ETC "loop2.service", "/etc/systemd/system/loop.service");
    link_to(t, ETC "out.service", "../../../../../../../../etc/passwd");
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/" ETC "fifo.service", t->root);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(path, sizeof(path), "%s/" ETC "dir.service", t->root);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(pfr_systemd_open(t->root, &sd), 0);
    assert_int_equal(pfr_systemd_unit_props(sd, "big.service", &p), -EFBIG);
    assert_int_equal(pfr_systemd_unit_props(sd, "many.service", &p), -E2BIG);
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND);
    assert_int_equal(pfr_systemd_unit_props(sd, "loop.service", &p), -ELOOP);
    assert_int_equal(pfr_systemd_unit_props(sd, "out.service", &p), 0);
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND); /* /etc/passwd of the root: none */
    assert_int_equal(pfr_systemd_unit_props(sd, "fifo.service", &p), 0);
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND);
    assert_int_equal(pfr_systemd_unit_props(sd, "dir.service", &p), 0);
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND);
    pfr_systemd_close(sd);
    /* a root that is not there */
    assert_int_equal(pfr_systemd_open("/nonexistent-pfr-root", &sd), -ENOENT);
    assert_null(sd);
}

/* This host's own unit files (Debian's apt, e2fsprogs, util-linux; a CI image is Debian too):
 * the oneshot services their enabled timers start are system services, ssh is not. */
static void test_host_files(void **state)
{
    (void)state;
    pfr_systemd *sd;
    assert_int_equal(pfr_systemd_open("/", &sd), 0);
    static const char *const timed[][2] = {{"apt-daily.service", "apt-daily.timer"},
                                           {"e2scrub_all.service", "e2scrub_all.timer"},
                                           {"fstrim.service", "fstrim.timer"}};
    for (size_t i = 0; i < 3; i++) {
        pfr_systemd_props p;
        assert_int_equal(pfr_systemd_unit_props(sd, timed[i][0], &p), 0);
        if (p.load != PFR_SYSTEMD_LOADED)
            fail_msg("%s: not found under /lib/systemd/system (a Debian host has it)", timed[i][0]);
        assert_string_equal(p.type, "oneshot");
        assert_string_equal(p.triggered_by, timed[i][1]);
        assert_true(pfr_system_service_is(timed[i][0], p.type, p.triggered_by, ""));
    }
    pfr_systemd_props p;
    assert_int_equal(pfr_systemd_unit_props(sd, "ssh.service", &p), 0);
    if (p.load == PFR_SYSTEMD_LOADED) /* openssh-server is not always installed */
        assert_false(pfr_system_service_is("ssh.service", p.type, p.triggered_by, NULL));
    assert_string_equal(p.triggered_by, "");
    pfr_systemd_close(sd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test_setup_teardown(test_types, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_not_services, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_search_order, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_dropins, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_templates, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_masked, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_timers, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_bounds, tree_setup, tree_teardown),
        cmocka_unit_test(test_host_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
