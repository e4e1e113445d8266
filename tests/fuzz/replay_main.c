/* Replays every file of the given directories (or files) through a libFuzzer entry point, for
 * builds without libFuzzer. Exits non-zero if a directory cannot be read. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    uint8_t tmp[65536];
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (len + n > cap) {
            cap = (len + n) * 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        memcpy(buf + len, tmp, n);
        len += n;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf ? buf : tmp, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "cannot stat %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files += replay_file(argv[i]) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d)
            return 1;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            files += replay_file(path) == 0;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", files);
    /* a corpus that went missing must not pass for one that replays cleanly */
    if (files == 0) {
        fprintf(stderr, "no input replayed: the seed corpus is empty or missing\n");
        return 1;
    }
    return 0;
}
