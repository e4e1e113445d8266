/* hang_fuse: a FUSE file system serving one file, /prog (a copy of the file given), that stops
 * answering on SIGUSR1: every request from then on blocks until SIGUSR2 or the end. It stands
 * for a hung NFS or FUSE server under a program a recorder profiles (fuse_itest.py).
 *
 *   hang_fuse SOURCE MOUNTPOINT [fuse options...]
 *
 * The file's name is $HANG_FUSE_NAME when set (a program pfr knows by its name, such as
 * python3.11: tests/python/python_fuse_itest.py), else prog.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *content; /* the served file */
static size_t content_len;
static volatile sig_atomic_t hung;
static char name[256] = "prog"; /* the served file's name; "/" name is its path */
static char path_of_file[258] = "/prog";

static void on_signal(int sig)
{
    hung = sig == SIGUSR1;
}

/* Every request passes here first: while hung it never returns (the kernel waits for it). */
static void gate(void)
{
    while (hung)
        usleep(100000); /* every thread sees the flag change */
}

static int do_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    (void)fi;
    gate();
    memset(st, 0, sizeof(*st));
    if (!strcmp(path, "/")) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, path_of_file))
        return -ENOENT;
    st->st_mode = S_IFREG | 0755;
    st->st_nlink = 1;
    st->st_size = (off_t)content_len;
    return 0;
}

static int do_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)off, (void)fi, (void)flags;
    gate();
    if (strcmp(path, "/"))
        return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, name, NULL, 0, 0);
    return 0;
}

static int do_open(const char *path, struct fuse_file_info *fi)
{
    gate();
    if (strcmp(path, path_of_file))
        return -ENOENT;
    if ((fi->flags & O_ACCMODE) != O_RDONLY)
        return -EACCES;
    fi->keep_cache = 1; /* the running program's pages stay cached while the server hangs */
    return 0;
}

static int do_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path, (void)fi;
    gate();
    if ((size_t)off >= content_len)
        return 0;
    if (size > content_len - (size_t)off)
        size = content_len - (size_t)off;
    memcpy(buf, content + off, size);
    return (int)size;
}

static const struct fuse_operations ops = {
    .getattr = do_getattr,
    .readdir = do_readdir,
    .open = do_open,
    .read = do_read,
};

static int load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    content = malloc((size_t)n);
    content_len = content && fread(content, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return content_len ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || load(argv[1])) {
        fprintf(stderr, "usage: hang_fuse SOURCE MOUNTPOINT [fuse options]\n");
        return 2;
    }
    const char *want = getenv("HANG_FUSE_NAME");
    if (want && *want && !strchr(want, '/') && strlen(want) < sizeof(name)) {
        snprintf(name, sizeof(name), "%s", want);
        snprintf(path_of_file, sizeof(path_of_file), "/%s", want);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    /* argv for fuse: its name, the mount point and the options, in the foreground */
    char **fargv = calloc((size_t)argc + 2, sizeof(*fargv));
    int n = 0;
    fargv[n++] = argv[0];
    fargv[n++] = "-f";
    for (int i = 2; i < argc; i++)
        fargv[n++] = argv[i];
    int rc = fuse_main(n, fargv, &ops, NULL);
    free(fargv);
    free(content);
    return rc;
}
