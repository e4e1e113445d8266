/* The shared helpers of common/: pfr_map against a reference, pfr_buf's encodings and sticky
 * error, pfr_gzip round trips and refusals, pfr_hash's fixed values, pfr_clock's clocks,
 * pfr_read_small's reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "pfr_buf.h"
#include "pfr_clock.h"
#include "pfr_gzip.h"
#include "pfr_hash.h"
#include "pfr_map.h"
#include "pfr_read_small.h"

/* ---- pfr_map ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s += PFR_HASH_GOLDEN;
    return pfr_mix64(*s);
}

/* Random puts and deletes over a small key space (so that clusters form and deletions shift
 * them), checked after every step against a plain array. */
static void test_map_matches_reference(void **state)
{
    (void)state;
    enum { KEYS = 512 };
    uint64_t ref[KEYS];
    bool in[KEYS] = {0};
    pfr_map m = {0};
    uint64_t s = 1;
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        uint64_t r = rng_next(&s);
        size_t k = (size_t)(r % KEYS);
        uint64_t key = k * 0x1000; /* aligned keys, key 0 included */
        if (r >> 62) {
            uint64_t v = r >> 8;
            assert_int_equal(pfr_map_put(&m, key, v), 0);
            live += !in[k];
            in[k] = true;
            ref[k] = v;
        } else {
            assert_int_equal(pfr_map_del(&m, key), in[k]);
            live -= in[k];
            in[k] = false;
        }
        assert_int_equal(m.n, live);
        if (step % 997 == 0) {
            for (size_t j = 0; j < KEYS; j++) {
                uint64_t *v = pfr_map_get(&m, j * 0x1000);
                assert_int_equal(v != NULL, in[j]);
                if (v)
                    assert_int_equal(*v, ref[j]);
            }
        }
    }
    pfr_map_free(&m);
}

static void test_map_intern_next_clear(void **state)
{
    (void)state;
    pfr_map m = {0};
    assert_null(pfr_map_get(&m, 0));
    assert_null(pfr_map_get(&m, 7));
    assert_false(pfr_map_del(&m, 7));
    uint64_t *v;
    assert_int_equal(pfr_map_intern(&m, 0, 10, &v), 0);
    assert_int_equal(*v, 10);
    assert_int_equal(pfr_map_intern(&m, 0, 11, &v), 1);
    assert_int_equal(*v, 10);
    for (uint64_t k = 1; k <= 1000; k++)
        assert_int_equal(pfr_map_intern(&m, k, k * 3, NULL), 0);
    assert_int_equal(m.n, 1001);
    assert_true(pfr_map_bytes(&m) >= 1001 * 2 * sizeof(uint64_t));
    size_t pos = 0, seen = 0;
    uint64_t key, val, sum = 0;
    while (pfr_map_next(&m, &pos, &key, &val)) {
        assert_int_equal(val, key ? key * 3 : 10);
        sum += key;
        seen++;
    }
    assert_int_equal(seen, 1001);
    assert_int_equal(sum, 1000 * 1001 / 2);
    assert_false(pfr_map_next(&m, &pos, &key, &val)); /* stays at the end */
    pfr_map_clear(&m);
    assert_int_equal(m.n, 0);
    assert_null(pfr_map_get(&m, 0));
    assert_null(pfr_map_get(&m, 5));
    pos = 0;
    assert_false(pfr_map_next(&m, &pos, &key, NULL));
    assert_int_equal(pfr_map_reserve(&m, 5000), 0);
    size_t cap = m.cap;
    for (uint64_t k = 1; k <= 5000; k++)
        assert_int_equal(pfr_map_put(&m, k << 20, k), 0);
    assert_int_equal(m.cap, cap); /* reserved: no growth */
    assert_int_equal(*pfr_map_get(&m, 77 << 20), 77);
    pfr_map_free(&m);
    assert_int_equal(m.cap, 0);
}

/* ---- pfr_buf ---- */

static void test_buf_encodings(void **state)
{
    (void)state;
    pfr_buf b = {0};
    pfr_buf_puts(&b, "ab");
    pfr_buf_putc(&b, 'c');
    pfr_buf_printf(&b, "%d-%s", 42, "x");
    assert_string_equal(pfr_buf_cstr(&b), "abc42-x");
    pfr_buf_reset(&b);
    pfr_buf_uvarint(&b, 300); /* ac 02 */
    pfr_buf_svarint(&b, -1);  /* 01 */
    pfr_buf_svarint(&b, 1);   /* 02 */
    pfr_buf_u8(&b, 0xff);     /* ff */
    pfr_buf_u64le(&b, 0x0102030405060708ull);
    const uint8_t want[] = {0xac, 0x02, 0x01, 0x02, 0xff, 8, 7, 6, 5, 4, 3, 2, 1};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    size_t len;
    uint8_t *d = pfr_buf_steal(&b, &len);
    assert_int_equal(len, sizeof(want));
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(d);
    /* A large append grows once and keeps every byte. */
    char big[100000];
    memset(big, 'q', sizeof(big));
    pfr_buf_put(&b, big, sizeof(big));
    assert_int_equal(b.len, sizeof(big));
    assert_memory_equal(b.data, big, sizeof(big));
    pfr_buf_free(&b);
}

static void test_buf_oom_is_sticky(void **state)
{
    (void)state;
    pfr_buf b = {0};
    pfr_buf_puts(&b, "kept");
    assert_int_equal(pfr_buf_reserve(&b, SIZE_MAX), -ENOMEM); /* len + extra overflows */
    assert_true(b.oom);
    pfr_buf_puts(&b, "dropped");
    assert_int_equal(b.len, 4);
    assert_null(pfr_buf_cstr(&b));
    size_t len = 99;
    assert_null(pfr_buf_steal(&b, &len)); /* the bytes of a failed buffer are not handed out */
    assert_int_equal(len, 0);
    assert_false(b.oom);
    pfr_buf_free(&b);
}

/* ---- pfr_gzip ---- */

/* Decompress with zlib itself, so the encoder is checked against the reference decoder. */
static size_t zlib_gunzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    z_stream z = {0};
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    size_t n = z.total_out;
    inflateEnd(&z);
    return n;
}

static void fill(uint8_t *p, size_t n)
{
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t) "abcdefgh"[rng_next(&s) % (i % 3 ? 8 : 2)];
}

static void test_gzip_round_trip(void **state)
{
    (void)state;
    enum { N = 300000 };
    uint8_t *src = malloc(N), *back = malloc(N + 1);
    assert_non_null(src);
    assert_non_null(back);
    fill(src, N);
    pfr_buf z = {0};
    pfr_buf_puts(&z, "HDR"); /* output is appended after what is there */
    assert_int_equal(pfr_gzip(src, N, 1, &z), 0);
    assert_memory_equal(z.data, "HDR", 3);
    assert_int_equal(z.data[3], 0x1f);
    assert_int_equal(z.data[4], 0x8b);
    assert_true(z.len < N / 2);
    assert_int_equal(zlib_gunzip(z.data + 3, z.len - 3, back, N + 1), N);
    assert_memory_equal(back, src, N);

    pfr_buf out = {0};
    char err[128] = "";
    assert_int_equal(pfr_gunzip(z.data + 3, z.len - 3, N, &out, err, sizeof(err)), 0);
    assert_int_equal(out.len, N);
    assert_memory_equal(out.data, src, N);

    /* Two members concatenated read as one stream. */
    pfr_buf two = {0};
    assert_int_equal(pfr_gzip("ab", 2, PFR_GZIP_DEFAULT_LEVEL, &two), 0);
    assert_int_equal(pfr_gzip("cd", 2, 9, &two), 0);
    pfr_buf_reset(&out);
    assert_int_equal(pfr_gunzip(two.data, two.len, 100, &out, err, sizeof(err)), 0);
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.data, "abcd", 4);

    /* An empty input is a valid stream of nothing. */
    pfr_buf_reset(&two);
    assert_int_equal(pfr_gzip(NULL, 0, 6, &two), 0);
    pfr_buf_reset(&out);
    assert_int_equal(pfr_gunzip(two.data, two.len, 100, &out, err, sizeof(err)), 0);
    assert_int_equal(out.len, 0);
    assert_int_equal(pfr_gzip("x", 1, 10, &two), -EINVAL);
    pfr_buf_free(&two);
    pfr_buf_free(&out);
    pfr_buf_free(&z);
    free(src);
    free(back);
}

static void test_gunzip_refuses_bad_input(void **state)
{
    (void)state;
    char zeros[4096] = {0};
    pfr_buf z = {0}, out = {0};
    char err[128];
    assert_int_equal(pfr_gzip(zeros, sizeof(zeros), 9, &z), 0);
    pfr_buf_puts(&out, "keep");
    /* A bomb stops at max, and out keeps what it had. */
    assert_int_equal(pfr_gunzip(z.data, z.len, 1000, &out, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "exceeds 1000 bytes"));
    assert_int_equal(out.len, 4);
    /* Exactly max is allowed. */
    pfr_buf_reset(&out);
    assert_int_equal(pfr_gunzip(z.data, z.len, sizeof(zeros), &out, err, sizeof(err)), 0);
    assert_int_equal(out.len, sizeof(zeros));
    /* Truncated, garbage after, corrupt. */
    pfr_buf_reset(&out);
    assert_int_equal(pfr_gunzip(z.data, z.len - 5, 1 << 20, &out, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "truncated"));
    pfr_buf_put(&z, "junk", 4);
    assert_int_equal(pfr_gunzip(z.data, z.len, 1 << 20, &out, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "trailing garbage"));
    assert_int_equal(pfr_gunzip("not gzip at all", 15, 1 << 20, &out, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "gzip: "));
    assert_int_equal(out.len, 0);
    pfr_buf_free(&z);
    pfr_buf_free(&out);
}

/* A stream fed in pieces gives the same bytes back as the input, and can be dropped midway. */
static void test_gzip_stream(void **state)
{
    (void)state;
    enum { N = 200000, PIECE = 7777 };
    uint8_t *src = malloc(N), *back = malloc(N);
    assert_non_null(src);
    assert_non_null(back);
    fill(src, N);
    pfr_gzip_stream g = {0};
    pfr_buf z = {0};
    for (size_t off = 0; off < N; off += PIECE) {
        size_t n = N - off < PIECE ? N - off : PIECE;
        assert_int_equal(pfr_gzip_stream_put(&g, 6, src + off, n, off + n == N, &z), 0);
    }
    assert_null(g.z); /* the last piece ended it */
    assert_int_equal(zlib_gunzip(z.data, z.len, back, N), N);
    assert_memory_equal(back, src, N);
    assert_int_equal(pfr_gzip_stream_put(&g, 1, src, 10, false, &z), 0);
    assert_non_null(g.z);
    pfr_gzip_stream_end(&g);
    assert_null(g.z);
    pfr_gzip_stream_end(&g);
    pfr_buf_free(&z);
    free(src);
    free(back);
}

/* ---- pfr_hash ---- */

static void test_hash_fixed_values(void **state)
{
    (void)state;
    /* FNV-1a's published test vectors. */
    assert_true(pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "", 0) == 0xcbf29ce484222325ull);
    assert_true(pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(pfr_hash_fnv1a_str(PFR_HASH_FNV_OFFSET, "foobar") == 0x85944171f73967e8ull);
    /* pfr_hash_bytes is stored (slice ids): these values must never change. */
    assert_true(pfr_hash_bytes("", 0) == 0xe220a8397b1dcdafull);
    assert_true(pfr_hash_bytes("service-a/profile", 17) == 0xae9814bc9ae3c124ull);
    /* The mixers spread neighbours apart; combine depends on order. */
    assert_true(pfr_mix64(1) != pfr_mix64(2));
    assert_true(pfr_mix64_fast(1) != pfr_mix64_fast(2));
    assert_true(pfr_hash_combine(1, 2) != pfr_hash_combine(2, 1));
}

/* ---- pfr_clock ---- */

static void test_clocks(void **state)
{
    (void)state;
    int64_t m1 = pfr_clock_mono_ns(), m2 = pfr_clock_mono_ns();
    assert_true(m1 > 0 && m2 >= m1);
    assert_true(pfr_clock_boot_ns() >= m1 - 1000000000ll); /* boottime >= monotonic, same origin */
    int64_t r = pfr_clock_real_ns();
    assert_true(r > 1600000000ll * 1000000000ll); /* after 2020 */
}

/* ---- pfr_read_small ---- */

static void on_alarm(int sig)
{
    (void)sig;
}

/* A file whole, one cut at cap-1, errors, a /proc file; and a read interrupted by a signal
 * (a handler without SA_RESTART) retried: a FIFO whose writer (a child) writes after the timer
 * fired in the read. */
static void test_read_small(void **state)
{
    (void)state;
    char dir[] = "/tmp/pfr-read-small-XXXXXX", path[64], buf[16];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/f", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("0123456789abcdefghij", f);
    fclose(f);
    assert_int_equal(pfr_read_small(path, buf, sizeof(buf)), 15);
    assert_string_equal(buf, "0123456789abcde");
    char big[64];
    assert_int_equal(pfr_read_small(path, big, sizeof(big)), 20);
    assert_string_equal(big, "0123456789abcdefghij");
    assert_int_equal(pfr_read_small(path, buf, 1), 0);
    assert_string_equal(buf, "");
    assert_int_equal(pfr_read_small(path, buf, 0), -EINVAL);
    assert_int_equal(pfr_read_small(dir, buf, sizeof(buf)), -EISDIR);
    unlink(path);
    assert_int_equal(pfr_read_small(path, buf, sizeof(buf)), -ENOENT);
    char status[8192];
    ssize_t n = pfr_read_small("/proc/self/status", status, sizeof(status));
    assert_true(n > 0 && (size_t)n == strlen(status));
    assert_non_null(strstr(status, "\nPid:"));

    assert_int_equal(mkfifo(path, 0600), 0);
    int keep = open(path, O_RDWR | O_CLOEXEC); /* the child's writer, so the open below returns */
    assert_true(keep >= 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        usleep(300000);
        _exit(write(keep, "late", 4) == 4 ? 0 : 1);
    }
    close(keep);
    struct sigaction sa = {.sa_handler = on_alarm}, old; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, &old);
    struct itimerval it = {.it_value = {.tv_usec = 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    n = pfr_read_small(path, big, sizeof(big));
    sigaction(SIGALRM, &old, NULL);
    int status_code;
    assert_int_equal(waitpid(child, &status_code, 0), child);
    assert_true(WIFEXITED(status_code) && WEXITSTATUS(status_code) == 0);
    assert_int_equal(n, 4);
    assert_string_equal(big, "late");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_matches_reference),
        cmocka_unit_test(test_map_intern_next_clear),
        cmocka_unit_test(test_buf_encodings),
        cmocka_unit_test(test_buf_oom_is_sticky),
        cmocka_unit_test(test_gzip_round_trip),
        cmocka_unit_test(test_gunzip_refuses_bad_input),
        cmocka_unit_test(test_gzip_stream),
        cmocka_unit_test(test_hash_fixed_values),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_read_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
