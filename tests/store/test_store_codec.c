/*
 * The store's blobs (store/store_codec.h): LZ4 HC with a state kept from blob to blob
 * (pfr_st_hc) makes blocks a reader decodes alone, as LZ4's fast mode does, and smaller ones.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store_codec.h"

#define RAW 1200

/* Bytes shaped like a chunk's body: small varints (stack deltas, label sets, counts) with
 * repeats at a distance. The same seed gives the same bytes. */
static size_t chunk_like(uint8_t *out, size_t cap, uint32_t seed)
{
    size_t n = 0;
    uint32_t x = seed * 2654435761u + 1;
    while (n + 8 <= cap) {
        x = x * 1103515245u + 12345u;
        out[n++] = (uint8_t)(x >> 27);
        out[n] = (uint8_t)(1 + n % 5);
        n++;
        out[n++] = (uint8_t)((x >> 20) & 3);
        if ((x >> 16) % 4 == 0 && n >= 48) {
            memcpy(out + n, out + n - 48, 5);
            n += 5;
        }
    }
    return n;
}

static void unpacks_to(const pfr_buf *blob, const uint8_t *raw, size_t len)
{
    pfr_buf back = {0};
    assert_int_equal(pfr_st_blob_unpack(blob->data, blob->len, &back), 0);
    assert_int_equal(back.len, len);
    assert_memory_equal(back.data, raw, len);
    pfr_buf_free(&back);
}

/* Each block of a kept state stands alone: decoded without the ones packed before it, which hold
 * most of its content (a block that referred to them would not decode, or decode wrong). */
static void hc_blocks_stand_alone(void **state)
{
    (void)state;
    pfr_st_hc *hc = pfr_st_hc_new();
    assert_non_null(hc);
    uint8_t raw[3][RAW];
    size_t len[3];
    pfr_buf blob[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        len[i] = chunk_like(raw[i], RAW, 7);
        raw[i][len[i] / 2] ^= (uint8_t)(i + 1);
        assert_int_equal(pfr_st_blob_pack(raw[i], len[i], hc, &blob[i]), 0);
        assert_true(blob[i].len < len[i]);
    }
    for (int i = 2; i >= 0; i--)
        unpacks_to(&blob[i], raw[i], len[i]);
    /* the second and third blocks are the first's size: no match into an earlier block */
    assert_true(blob[1].len + 8 >= blob[0].len);
    assert_true(blob[2].len + 8 >= blob[0].len);
    pfr_st_hc_free(hc);
    for (int i = 0; i < 3; i++)
        pfr_buf_free(&blob[i]);
}

/* HC finds more than the fast mode in a chunk's bytes; without a state, the fast mode. */
static void hc_smaller_than_fast(void **state)
{
    (void)state;
    pfr_st_hc *hc = pfr_st_hc_new();
    assert_non_null(hc);
    size_t sum_hc = 0, sum_fast = 0;
    for (uint32_t seed = 1; seed <= 16; seed++) {
        uint8_t raw[RAW];
        size_t len = chunk_like(raw, RAW, seed);
        pfr_buf a = {0}, b = {0};
        assert_int_equal(pfr_st_blob_pack(raw, len, hc, &a), 0);
        assert_int_equal(pfr_st_blob_pack(raw, len, NULL, &b), 0);
        assert_true(a.len <= b.len);
        unpacks_to(&a, raw, len);
        unpacks_to(&b, raw, len);
        sum_hc += a.len;
        sum_fast += b.len;
        pfr_buf_free(&a);
        pfr_buf_free(&b);
    }
    assert_true(sum_hc < sum_fast);
    pfr_st_hc_free(hc);
}

/* What neither mode can compress is stored as it is, and a kept state goes on after it. */
static void incompressible_stored_raw(void **state)
{
    (void)state;
    pfr_st_hc *hc = pfr_st_hc_new();
    assert_non_null(hc);
    uint8_t noise[512], raw[RAW];
    uint32_t x = 99;
    for (size_t i = 0; i < sizeof(noise); i++) {
        x = x * 1664525u + 1013904223u;
        noise[i] = (uint8_t)(x >> 24);
    }
    pfr_buf blob = {0};
    assert_int_equal(pfr_st_blob_pack(noise, sizeof(noise), hc, &blob), 0);
    assert_true(blob.len > sizeof(noise));
    unpacks_to(&blob, noise, sizeof(noise));
    size_t len = chunk_like(raw, RAW, 3);
    assert_int_equal(pfr_st_blob_pack(raw, len, hc, &blob), 0);
    assert_true(blob.len < len);
    unpacks_to(&blob, raw, len);
    pfr_buf_free(&blob);
    pfr_st_hc_free(hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hc_blocks_stand_alone),
        cmocka_unit_test(hc_smaller_than_fast),
        cmocka_unit_test(incompressible_stored_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
