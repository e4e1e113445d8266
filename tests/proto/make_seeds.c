/* Writes the seed corpus of fuzz_profile_decode: small valid profiles (raw and gzip'd), one with
 * sparse ids and lines without functions, and a few malformed ones. Usage: make_seeds <dir> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_profile.h"
#include "pfr_testgen.h"
#include "profile.pb-c.h"

static const char *dir;

static void put(const char *name, const uint8_t *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void put_profile(const char *name, const pfr_profile *p, bool gz)
{
    uint8_t *buf;
    size_t len;
    if (pfr_profile_encode(p, gz, &buf, &len) != 0)
        exit(1);
    put(name, buf, len);
    free(buf);
}

static pfr_profile *small_profile(void)
{
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "samples", "count");
    pfr_profile_add_sample_type(p, "cpu", "nanoseconds");
    pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
    pfr_profile_set_time(p, 1700000000000000000, 10000000000);
    int64_t m = pfr_profile_add_mapping(p, 0x400000, 0x500000, 0, "/bin/app", "b1d");
    int64_t f1 = pfr_profile_add_function(p, "main", "main", "m.c", 1);
    int64_t f2 = pfr_profile_add_function(p, "inl", "inl", "i.h", 2);
    pfr_line ls[2] = {{(uint32_t)f2, 3}, {(uint32_t)f1, 4}};
    uint32_t a = (uint32_t)pfr_profile_add_location(p, m, 0x401000, ls, 2);
    uint32_t b = (uint32_t)pfr_profile_add_frame(p, "leaf", "l.c", 5);
    uint32_t st[] = {b, a};
    int64_t v[] = {2, 20000000};
    pfr_label l[] = {{"pid", NULL, 7, NULL}, {"comm", "app", 0, NULL}, {"sz", NULL, 8, "bytes"}};
    pfr_profile_add_sample(p, st, 2, v, l, 3);
    pfr_profile_add_sample(p, st + 1, 1, v, l, 1);
    return p;
}

static void sparse_ids(void)
{
    char *strs[] = {"", "cpu", "ns", "f", "g.go", "k", "v"};
    Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    vt.type = 1;
    vt.unit = 2;
    Perftools__Profiles__ValueType *vts[] = {&vt};
    Perftools__Profiles__Mapping mp = PERFTOOLS__PROFILES__MAPPING__INIT;
    mp.id = 77;
    mp.filename = 4;
    Perftools__Profiles__Mapping *mps[] = {&mp};
    Perftools__Profiles__Function fn = PERFTOOLS__PROFILES__FUNCTION__INIT;
    fn.id = 123456789;
    fn.name = 3;
    fn.filename = 4;
    Perftools__Profiles__Function *fns[] = {&fn};
    Perftools__Profiles__Line l1 = PERFTOOLS__PROFILES__LINE__INIT, l0 = l1;
    l1.function_id = 123456789;
    l1.line = 10;
    l0.line = 11; /* no function */
    Perftools__Profiles__Line *lines[] = {&l0, &l1};
    Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT, loc2 = loc;
    loc.id = 99;
    loc.mapping_id = 77;
    loc.address = 0x1000;
    loc.n_line = 2;
    loc.line = lines;
    loc2.id = 5;
    loc2.address = 0x2000;
    Perftools__Profiles__Location *locs[] = {&loc, &loc2};
    uint64_t ids[] = {5, 99, 99};
    int64_t val = 3;
    Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT;
    lab.key = 5;
    lab.str = 6;
    Perftools__Profiles__Label *labs[] = {&lab};
    Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
    s.n_location_id = 3;
    s.location_id = ids;
    s.n_value = 1;
    s.value = &val;
    s.n_label = 1;
    s.label = labs;
    Perftools__Profiles__Sample *ss[] = {&s};
    Perftools__Profiles__Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
    m.n_string_table = 7;
    m.string_table = strs;
    m.n_sample_type = 1;
    m.sample_type = vts;
    m.n_mapping = 1;
    m.mapping = mps;
    m.n_function = 1;
    m.function = fns;
    m.n_location = 2;
    m.location = locs;
    m.n_sample = 1;
    m.sample = ss;
    uint8_t buf[4096];
    size_t len = perftools__profiles__profile__pack(&m, buf);
    put("sparse_ids.pb", buf, len);
    fn.name = 42; /* out of range */
    len = perftools__profiles__profile__pack(&m, buf);
    put("bad_string_index.pb", buf, len);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    pfr_profile *e = pfr_profile_new();
    put_profile("empty.pb", e, false);
    pfr_profile_free(e);

    pfr_profile *p = small_profile();
    put_profile("small.pb", p, false);
    put_profile("small.pb.gz", p, true);
    uint8_t *buf;
    size_t len;
    pfr_profile_encode(p, false, &buf, &len);
    put("small_truncated.pb", buf, len / 2);
    free(buf);
    pfr_profile_free(p);

    pfr_testgen_opts o = {.nstacks = 6, .min_depth = 3, .max_depth = 8, .nfunctions = 40};
    pfr_testgen *g = pfr_testgen_new(1, 0, &o);
    p = pfr_testgen_next(g, 1700000000000000000, 10000000000);
    put_profile("gen.pb", p, false);
    put_profile("gen.pb.gz", p, true);
    pfr_profile_free(p);
    pfr_testgen_free(g);

    sparse_ids();
    return 0;
}
