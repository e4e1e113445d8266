/* jfrgen: JFR chunks for tests (jfrgen.h). Aborts on out of memory: test code. */
#include "jfrgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pfr_jg_free(jg *g)
{
    free(g->b);
    memset(g, 0, sizeof(*g));
}

void pfr_jg_bytes(jg *g, const void *p, size_t n)
{
    if (g->n + n > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->n + n)
            cap *= 2;
        g->b = realloc(g->b, cap);
        if (!g->b)
            abort();
        g->cap = cap;
    }
    if (n)
        memcpy(g->b + g->n, p, n);
    g->n += n;
}

void pfr_jg_u8(jg *g, uint8_t v)
{
    pfr_jg_bytes(g, &v, 1);
}

void pfr_jg_var(jg *g, uint64_t v)
{
    for (int i = 0; i < 8 && v >= 0x80; i++) {
        pfr_jg_u8(g, (uint8_t)(0x80 | (v & 0x7f)));
        v >>= 7;
    }
    pfr_jg_u8(g, (uint8_t)v); /* the 9th byte, if it comes to that, holds the last 8 bits */
}

void pfr_jg_be64(jg *g, uint64_t v)
{
    for (int i = 7; i >= 0; i--)
        pfr_jg_u8(g, (uint8_t)(v >> (8 * i)));
}

void pfr_jg_str(jg *g, const char *s)
{
    pfr_jg_u8(g, 3);
    pfr_jg_var(g, strlen(s));
    pfr_jg_bytes(g, s, strlen(s));
}

void pfr_jg_record(jg *g, uint64_t type, const jg *body)
{
    jg head = {0};
    pfr_jg_var(&head, type);
    uint64_t size = 4 + head.n + body->n;
    uint8_t sz[4] = {(uint8_t)(0x80 | (size & 0x7f)), (uint8_t)(0x80 | ((size >> 7) & 0x7f)),
                     (uint8_t)(0x80 | ((size >> 14) & 0x7f)), (uint8_t)((size >> 21) & 0x7f)};
    pfr_jg_bytes(g, sz, 4);
    pfr_jg_bytes(g, head.b, head.n);
    pfr_jg_bytes(g, body->b, body->n);
    pfr_jg_free(&head);
}

const jg_class pfr_jg_std_classes[] = {
    {JG_BOOLEAN, "boolean", {{0}}},
    {JG_INT, "int", {{0}}},
    {JG_LONG, "long", {{0}}},
    {JG_DOUBLE, "double", {{0}}},
    {JG_STRING, "java.lang.String", {{0}}},
    {JG_SYMBOL, "jdk.types.Symbol", {{"string", JG_STRING, false, false}}},
    {JG_CLASS,
     "java.lang.Class",
     {{"name", JG_SYMBOL, true, false}, {"modifiers", JG_INT, false, false}}},
    {JG_METHOD,
     "jdk.types.Method",
     {{"type", JG_CLASS, true, false},
      {"name", JG_SYMBOL, true, false},
      {"descriptor", JG_SYMBOL, true, false}}},
    {JG_FRAME,
     "jdk.types.StackFrame",
     {{"method", JG_METHOD, true, false},
      {"lineNumber", JG_INT, false, false},
      {"bytecodeIndex", JG_INT, false, false}}},
    {JG_STACK,
     "jdk.types.StackTrace",
     {{"truncated", JG_BOOLEAN, false, false}, {"frames", JG_FRAME, false, true}}},
    {JG_THREAD, "java.lang.Thread", {{"javaName", JG_STRING, false, false}}},
    {JG_EXEC,
     "jdk.ExecutionSample",
     {{"startTime", JG_LONG, false, false},
      {"sampledThread", JG_THREAD, true, false},
      {"stackTrace", JG_STACK, true, false}}},
    {JG_ALLOC,
     "jdk.ObjectAllocationSample",
     {{"startTime", JG_LONG, false, false},
      {"eventThread", JG_THREAD, true, false},
      {"stackTrace", JG_STACK, true, false},
      {"objectClass", JG_CLASS, true, false},
      {"weight", JG_LONG, false, false}}},
    {JG_MONITOR,
     "jdk.JavaMonitorEnter",
     {{"startTime", JG_LONG, false, false},
      {"duration", JG_LONG, false, false},
      {"eventThread", JG_THREAD, true, false},
      {"stackTrace", JG_STACK, true, false},
      {"monitorClass", JG_CLASS, true, false},
      {"address", JG_LONG, false, false}}},
    {JG_PARK,
     "jdk.ThreadPark",
     {{"startTime", JG_LONG, false, false},
      {"duration", JG_LONG, false, false},
      {"eventThread", JG_THREAD, true, false},
      {"stackTrace", JG_STACK, true, false}}},
    {JG_CPULOAD,
     "jdk.CPULoad",
     {{"startTime", JG_LONG, false, false},
      {"jvmUser", JG_DOUBLE, false, false},
      {"machineTotal", JG_DOUBLE, false, false}}},
};
const size_t pfr_jg_std_nclasses = sizeof(pfr_jg_std_classes) / sizeof(pfr_jg_std_classes[0]);

/* ---- metadata ---- */

typedef struct strtab {
    const char *s[512];
    size_t n;
} strtab;

static uint64_t str_index(strtab *t, const char *s)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->s[i], s) == 0)
            return i;
    if (t->n == 512)
        abort();
    t->s[t->n] = s;
    return t->n++;
}

typedef struct attr {
    const char *k, *v;
} attr;

static void element_head(jg *g, strtab *t, const char *name, const attr *a, size_t na,
                         uint64_t nchild)
{
    pfr_jg_var(g, str_index(t, name));
    pfr_jg_var(g, na);
    for (size_t i = 0; i < na; i++) {
        pfr_jg_var(g, str_index(t, a[i].k));
        pfr_jg_var(g, str_index(t, a[i].v));
    }
    pfr_jg_var(g, nchild);
}

static size_t nfields(const jg_class *c)
{
    size_t n = 0;
    while (n < 8 && c->fields[n].name)
        n++;
    return n;
}

void pfr_jg_metadata(jg *g, const jg_class *classes, size_t n, int extra_depth)
{
    static char ids[512][24];
    size_t nid = 0;
    strtab t = {{0}, 0};
    jg tree = {0};
    element_head(&tree, &t, "root", NULL, 0, 2);
    element_head(&tree, &t, "metadata", NULL, 0, extra_depth > 0 ? 1 : n);
    for (int d = 0; d < extra_depth; d++)
        element_head(&tree, &t, "nest", NULL, 0, d + 1 < extra_depth ? 1 : n);
    for (size_t i = 0; i < n; i++) {
        const jg_class *c = &classes[i];
        snprintf(ids[nid], sizeof(ids[nid]), "%llu", (unsigned long long)c->id);
        attr ca[2] = {{"id", ids[nid++]}, {"name", c->name}};
        size_t nf = nfields(c);
        element_head(&tree, &t, "class", ca, 2, nf);
        for (size_t f = 0; f < nf; f++) {
            snprintf(ids[nid], sizeof(ids[nid]), "%llu", (unsigned long long)c->fields[f].type);
            attr fa[4] = {{"name", c->fields[f].name}, {"class", ids[nid++]}};
            size_t na = 2;
            if (c->fields[f].cpool)
                fa[na++] = (attr){"constantPool", "true"};
            if (c->fields[f].array)
                fa[na++] = (attr){"dimension", "1"};
            element_head(&tree, &t, "field", fa, na, 0);
        }
    }
    attr ra[1] = {{"gmtOffset", "0"}};
    element_head(&tree, &t, "region", ra, 1, 0);
    jg body = {0};
    pfr_jg_var(&body, 0); /* start */
    pfr_jg_var(&body, 0); /* duration */
    pfr_jg_var(&body, 1); /* metadata id */
    pfr_jg_var(&body, t.n);
    for (size_t i = 0; i < t.n; i++)
        pfr_jg_str(&body, t.s[i]);
    pfr_jg_bytes(&body, tree.b, tree.n);
    pfr_jg_record(g, 0, &body);
    pfr_jg_free(&tree);
    pfr_jg_free(&body);
}

void pfr_jg_checkpoint(jg *g, int64_t delta, uint64_t npools, const jg *pools)
{
    jg body = {0};
    pfr_jg_var(&body, 0);
    pfr_jg_var(&body, 0);
    pfr_jg_var(&body, (uint64_t)delta);
    pfr_jg_u8(&body, 0);
    pfr_jg_var(&body, npools);
    pfr_jg_bytes(&body, pools->b, pools->n);
    pfr_jg_record(g, 1, &body);
    pfr_jg_free(&body);
}

/* Stack trace 2 of the standard pools: the lambda's run < Main.work:11 < Thread.run:20. */
static void stack2_entry(jg *p)
{
    pfr_jg_var(p, 2);
    pfr_jg_u8(p, 1);
    pfr_jg_var(p, 3);
    pfr_jg_var(p, 3), pfr_jg_var(p, (uint64_t)-1 & 0xffffffff), pfr_jg_var(p, 0);
    pfr_jg_var(p, 1), pfr_jg_var(p, 11), pfr_jg_var(p, 3);
    pfr_jg_var(p, 2), pfr_jg_var(p, 20), pfr_jg_var(p, 4);
}

void pfr_jg_std_pools(jg *p, uint64_t *npools)
{
    pfr_jg_std_pools_with(p, npools, true);
}

void pfr_jg_std_pools_with(jg *p, uint64_t *npools, bool stack2)
{
    static const char *syms[] = {"",     "Main",
                                 "run",  "java/lang/Thread",
                                 "work", "Foo$$Lambda$14+0x00007fd218009a00/1616974404",
                                 "()V"};
    pfr_jg_var(p, JG_SYMBOL);
    pfr_jg_var(p, 6);
    for (uint64_t k = 1; k <= 6; k++) {
        pfr_jg_var(p, k);
        pfr_jg_str(p, syms[k]);
    }
    pfr_jg_var(p, JG_CLASS); /* key, name, modifiers */
    pfr_jg_var(p, 3);
    for (uint64_t k = 1; k <= 3; k++) {
        static const uint64_t names[] = {0, 1, 3, 5};
        pfr_jg_var(p, k);
        pfr_jg_var(p, names[k]);
        pfr_jg_var(p, 1);
    }
    pfr_jg_var(p, JG_METHOD); /* key, class, name, descriptor */
    pfr_jg_var(p, 3);
    static const uint64_t meth[4][2] = {{0, 0}, {1, 4}, {2, 2}, {3, 2}};
    for (uint64_t k = 1; k <= 3; k++) {
        pfr_jg_var(p, k);
        pfr_jg_var(p, meth[k][0]);
        pfr_jg_var(p, meth[k][1]);
        pfr_jg_var(p, 6);
    }
    pfr_jg_var(p,
               JG_STACK); /* 1: Main.work:10 < Thread.run:20; 2: lambda run < Main.work:11 < ... */
    pfr_jg_var(p, stack2 ? 2 : 1);
    pfr_jg_var(p, 1);
    pfr_jg_u8(p, 0);
    pfr_jg_var(p, 2);
    pfr_jg_var(p, 1), pfr_jg_var(p, 10), pfr_jg_var(p, 3);
    pfr_jg_var(p, 2), pfr_jg_var(p, 20), pfr_jg_var(p, 4);
    if (stack2)
        stack2_entry(p);
    pfr_jg_var(p, JG_THREAD);
    pfr_jg_var(p, 1);
    pfr_jg_var(p, 1);
    pfr_jg_str(p, "main");
    *npools = 5;
}

static void event(jg *g, uint64_t type, const uint64_t *f, size_t n, bool doubles)
{
    jg body = {0};
    for (size_t i = 0; i < n; i++)
        pfr_jg_var(&body, f[i]);
    if (doubles) {
        pfr_jg_be64(&body, 0x3fe0000000000000ull);
        pfr_jg_be64(&body, 0x3fe0000000000000ull);
    }
    pfr_jg_record(g, type, &body);
    pfr_jg_free(&body);
}

void pfr_jg_std_events(jg *g)
{
    uint64_t t = 1000;
    for (int i = 0; i < 3; i++)
        event(g, JG_EXEC, (uint64_t[]){t++, 1, 1}, 3, false);
    event(g, JG_EXEC, (uint64_t[]){t++, 1, 2}, 3, false);
    event(g, JG_ALLOC, (uint64_t[]){t++, 1, 1, 1, 4096}, 5, false);
    event(g, JG_MONITOR, (uint64_t[]){t++, 5000000, 1, 2, 1, 0x1234}, 6, false);
    event(g, JG_PARK, (uint64_t[]){t++, 7000000, 1, 1}, 4, false);
    event(g, JG_CPULOAD, (uint64_t[]){t++}, 1, true);
}

void pfr_jg_chunk_header(jg *g, const jg_header *h)
{
    pfr_jg_bytes(g, "FLR\0", 4);
    uint8_t ver[4] = {0, 2, 0, 1};
    pfr_jg_bytes(g, ver, 4);
    pfr_jg_be64(g, h->size);
    pfr_jg_be64(g, h->cp_off);
    pfr_jg_be64(g, h->md_off);
    pfr_jg_be64(g, (uint64_t)h->start_ns);
    pfr_jg_be64(g, (uint64_t)h->duration_ns);
    pfr_jg_be64(g, (uint64_t)h->start_ticks);
    pfr_jg_be64(g, (uint64_t)h->tps);
    uint8_t tail[4] = {h->state, 0, 0, 1};
    pfr_jg_bytes(g, tail, 4);
}

void pfr_jg_std_chunk(jg *g)
{
    jg ev = {0}, md = {0}, pools = {0}, cp = {0};
    uint64_t npools;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    pfr_jg_std_pools(&pools, &npools);
    pfr_jg_checkpoint(&cp, 0, npools, &pools);
    jg_header h = {
        .size = 68 + ev.n + md.n + cp.n,
        .md_off = 68 + ev.n,
        .cp_off = 68 + ev.n + md.n,
        .start_ns = 1000000000000000000,
        .duration_ns = 1000000000,
        .start_ticks = 0,
        .tps = 1000000000,
    };
    pfr_jg_chunk_header(g, &h);
    pfr_jg_bytes(g, ev.b, ev.n);
    pfr_jg_bytes(g, md.b, md.n);
    pfr_jg_bytes(g, cp.b, cp.n);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&pools);
    pfr_jg_free(&cp);
}
