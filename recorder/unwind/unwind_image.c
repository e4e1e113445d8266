/*
 * unwind_image: a sparse private image of an ELF file, its .eh_frame copied on demand.
 *
 * What is copied is found with libelf over the descriptor: the ELF header, the program and
 * section header tables, PT_NOTE and PT_GNU_EH_FRAME segments, and the first section of each
 * name the builder reads. Everything but .eh_frame is copied at once; .eh_frame is a window
 * (see unwind_image.h) unless bytes the builder writes (in .eh_frame_hdr) fall inside it.
 */
#include "unwind_image.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define HDR_COPY PFR_UW_HDR_COPY

/* File ranges copied at load (a file has at most a few dozen: headers, notes, sections). */
#define MAX_SPANS 48u

struct span {
    uint64_t lo, hi; /* [lo, hi) of the file */
};

typedef struct fill {
    pfr_uw_image *im;
    struct span spans[MAX_SPANS]; /* copied at once */
    size_t nspans;
    bool untold;         /* more ranges than spans holds: no window */
    struct span eh;      /* .eh_frame and its tail; lo == hi none */
    uint64_t eh_end;     /* the end of .eh_frame itself (without its tail) */
    struct span hdr;     /* .eh_frame_hdr, which the builder writes */
    uint64_t room;       /* bytes that may still be copied at once (the caller's max_held) */
    uint64_t max_window; /* the caller's */
} fill;

/* [off, off + len + PFR_UW_IMAGE_TAIL) clipped to the file. */
static struct span span_of(const pfr_uw_image *im, uint64_t off, uint64_t len)
{
    if (off >= im->size)
        return (struct span){0, 0};
    uint64_t end = len > im->size - off ? im->size : off + len;
    end = im->size - end > PFR_UW_IMAGE_TAIL ? end + PFR_UW_IMAGE_TAIL : im->size;
    return (struct span){off, end};
}

/* Copy [lo, hi) of the file into the image. */
static int copy_range(pfr_uw_image *im, uint64_t lo, uint64_t hi)
{
    while (lo < hi) {
        ssize_t n = pread(im->fd, im->p + lo, hi - lo, (off_t)lo);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break; /* the file shrank: the rest stays zero, and reads as corrupt */
        lo += (uint64_t)n;
    }
    return 0;
}

/* Copy a range now, and remember it (it must not be dropped with the window's pages). */
static int fill_copy(fill *f, uint64_t off, uint64_t len)
{
    struct span s = span_of(f->im, off, len);
    if (s.lo == s.hi)
        return 0;
    if (s.hi - s.lo > f->room)
        return -EFBIG; /* checked before anything of it is copied */
    f->room -= s.hi - s.lo;
    if (f->nspans < MAX_SPANS)
        f->spans[f->nspans++] = s;
    else
        f->untold = true;
    return copy_range(f->im, s.lo, s.hi);
}

/* The headers, notes and sections the builder reads, found with libelf over the descriptor. */
static int fill_find(fill *f, Elf *e)
{
    GElf_Ehdr eh;
    int rc = fill_copy(f, 0, sizeof(Elf64_Ehdr));
    if (rc < 0 || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
        !gelf_getehdr(e, &eh))
        return rc; /* the header alone tells the builder what is wrong */
    size_t nph = 0, nsh = 0, shstrndx = 0;
    /* libelf reads the tables with its own entry sizes, whatever e_phentsize says */
    uint64_t phsz = eh.e_phentsize > sizeof(Elf64_Phdr) ? eh.e_phentsize : sizeof(Elf64_Phdr);
    uint64_t shsz = eh.e_shentsize > sizeof(Elf64_Shdr) ? eh.e_shentsize : sizeof(Elf64_Shdr);
    if (elf_getphdrnum(e, &nph) == 0 && nph <= PFR_UW_MAX_PHDRS)
        rc = fill_copy(f, eh.e_phoff, nph * phsz);
    if (rc == 0 && elf_getshdrnum(e, &nsh) == 0 && nsh <= PFR_UW_MAX_SCNS)
        rc = fill_copy(f, eh.e_shoff, (nsh ? nsh : 1) * shsz);
    unsigned notes = 0;
    for (size_t i = 0; rc == 0 && i < nph && nph <= PFR_UW_MAX_PHDRS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph))
            break;
        if (ph.p_type == PT_NOTE && notes++ < PFR_UW_MAX_NOTES)
            rc = fill_copy(f, ph.p_offset, ph.p_filesz);
        else if (ph.p_type == PT_GNU_EH_FRAME)
            rc = fill_copy(f, ph.p_offset, ph.p_filesz < HDR_COPY ? ph.p_filesz : HDR_COPY);
    }
    if (rc < 0 || elf_getshdrstrndx(e, &shstrndx) != 0)
        return rc;
    /* the first section of each name, as the builder and libdw take it */
    static const char *const wanted[] = {".eh_frame", ".eh_frame_hdr", ".debug_frame",
                                         ".note.go.buildid"};
    bool seen[sizeof(wanted) / sizeof(wanted[0])] = {false};
    Elf_Scn *scn = NULL;
    for (unsigned count = 0; rc == 0 && (scn = elf_nextscn(e, scn)) && count < PFR_UW_MAX_SCNS;
         count++) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
            continue; /* as the builder skips them */
        if (elf_ndxscn(scn) == shstrndx) {
            rc = fill_copy(f, sh.sh_offset, sh.sh_size);
            continue;
        }
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        for (size_t w = 0; name && w < sizeof(wanted) / sizeof(wanted[0]); w++) {
            if (seen[w] || strcmp(name, wanted[w]) != 0)
                continue;
            seen[w] = true;
            if (w == 1 && sh.sh_size > HDR_COPY)
                sh.sh_size = HDR_COPY;
            if (w == 0) { /* copied later */
                f->eh = span_of(f->im, sh.sh_offset, sh.sh_size);
                f->eh_end =
                    sh.sh_size < f->im->size - f->eh.lo ? f->eh.lo + sh.sh_size : f->im->size;
            } else
                rc = fill_copy(f, sh.sh_offset, sh.sh_size);
            if (w == 1) /* (its copied part: the rest of the image holds no bytes of it) */
                f->hdr = (struct span){sh.sh_offset, sh.sh_offset + sh.sh_size};
        }
    }
    return rc;
}

static bool overlap(struct span a, struct span b)
{
    return a.lo < b.hi && b.lo < a.hi;
}

/* A page read again must read the same. Its hash is a polynomial over its 32-bit words at a
 * secret point, mod 2^61 - 1: two different pages of n words hash the same with a chance of
 * n / 2^61 for a key the file's writer cannot know (chosen per image). Never 0. */
#define SUM_P ((1ull << 61) - 1)

static uint64_t sum_step(uint64_t h, uint64_t key, uint32_t w)
{
    unsigned __int128 m = (unsigned __int128)h * key;
    uint64_t r = ((uint64_t)m & SUM_P) + (uint64_t)(m >> 61);
    r = r >= SUM_P ? r - SUM_P : r;
    r += w;
    return r >= SUM_P ? r - SUM_P : r;
}

static uint64_t page_sum(const uint8_t *p, size_t n, uint64_t key)
{
    uint64_t h = 1;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, p + i, 4);
        h = sum_step(h, key, w);
    }
    for (; i < n; i++)
        h = sum_step(h, key, p[i]);
    return h | 1ull << 63;
}

/* The hash's secret point: random, else what an outsider cannot easily guess. */
static uint64_t sum_key(const pfr_uw_image *im)
{
    uint64_t k = 0;
    if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k = ((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec) * 0x9e3779b97f4a7c15ull ^
            (uint64_t)(uintptr_t)im->p;
    }
    return k % (SUM_P - 1) + 1;
}

/* Set up the window over f->eh, or copy it whole when it cannot be one. */
static int fill_window(fill *f)
{
    pfr_uw_image *im = f->im;
    struct span w = f->eh;
    if (w.lo == w.hi)
        return 0;
    if (f->eh_end - w.lo > f->max_window)
        return -EFBIG; /* the section's size (its pages' marks and sums: 9 bytes a page) */
    /* the builder's writes in .eh_frame_hdr must never be copied over: a window stops where
     * .eh_frame_hdr starts right after the section (lld's layout), and there is none when the
     * two overlap */
    if (overlap(w, f->hdr) && f->hdr.lo >= f->eh_end)
        w.hi = f->hdr.lo;
    if (f->untold || overlap(w, f->hdr))
        return w.hi - w.lo > f->room ? -EFBIG : copy_range(im, w.lo, w.hi);
    uint64_t pg = im->page;
    uint64_t first = w.lo / pg, npages = (w.hi - 1) / pg - first + 1;
    im->resident = calloc(npages, 1);
    im->sums = calloc(npages, sizeof(*im->sums));
    if (!im->resident || !im->sums)
        return w.hi - w.lo > f->room ? -ENOMEM : copy_range(im, w.lo, w.hi); /* copied whole */
    im->win_lo = w.lo;
    im->win_hi = w.hi;
    im->first_page = first;
    im->key = sum_key(im);
    /* droppable: pages wholly inside the section (not its tail) that nothing else shares */
    struct span d = {(w.lo + pg - 1) / pg * pg, f->eh_end / pg * pg};
    for (size_t i = 0; i < f->nspans && d.lo < d.hi; i++) {
        struct span s = f->spans[i];
        if (!overlap(s, d))
            continue;
        if (s.lo <= d.lo)
            d.lo = (s.hi + pg - 1) / pg * pg;
        else if (s.hi >= d.hi)
            d.hi = s.lo / pg * pg;
        else
            d.hi = d.lo; /* inside: keep it simple, drop nothing */
    }
    if (d.lo < d.hi) {
        im->drop_lo = d.lo;
        im->drop_hi = d.hi;
    }
    return 0;
}

int pfr_uw_image_load(pfr_uw_image *im, int fd, uint64_t size, uint64_t max_held,
                      uint64_t max_window)
{
    memset(im, 0, sizeof(*im));
    im->fd = fd;
    im->size = size;
    long pg = sysconf(_SC_PAGESIZE);
    im->page = pg > 0 && !(pg & (pg - 1)) ? (uint64_t)pg : 4096;
    while ((1ull << im->shift) < im->page)
        im->shift++;
    /* untouched pages cost nothing: only what is copied is ever backed */
    void *p = mmap(NULL, PFR_UW_IMAGE_PREFIX + size + PFR_UW_IMAGE_PAD, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    im->p = (uint8_t *)p + PFR_UW_IMAGE_PREFIX;
    fill f = {.im = im, .room = max_held, .max_window = max_window};
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    int rc = e ? fill_find(&f, e) : fill_copy(&f, 0, sizeof(Elf64_Ehdr));
    if (e)
        elf_end(e);
    if (rc == 0)
        rc = fill_window(&f);
    return rc;
}

static bool droppable(const pfr_uw_image *im, uint64_t pg)
{
    return pg * im->page >= im->drop_lo && (pg + 1) * im->page <= im->drop_hi;
}

/* Copy page pg (absolute index) of the window, and check it against its first copy. */
static int load_page(pfr_uw_image *im, uint64_t pg)
{
    size_t i = (size_t)(pg - im->first_page);
    uint64_t lo = pg * im->page > im->win_lo ? pg * im->page : im->win_lo;
    uint64_t hi = (pg + 1) * im->page < im->win_hi ? (pg + 1) * im->page : im->win_hi;
    int rc = copy_range(im, lo, hi);
    if (rc < 0)
        return rc;
    uint64_t sum = page_sum(im->p + lo, (size_t)(hi - lo), im->key);
    if (im->sums[i] && im->sums[i] != sum)
        return -ESTALE;
    im->sums[i] = sum;
    im->resident[i] = 1;
    if (droppable(im, pg))
        im->held++;
    return 0;
}

int pfr_uw_image_need(pfr_uw_image *im, const void *at, uint64_t len)
{
    if (!im || im->win_lo == im->win_hi)
        return 0;
    const uint8_t *a = at;
    if (a < im->p || a >= im->p + im->size)
        return 0;
    uint64_t lo = (uint64_t)(a - im->p);
    uint64_t hi = len > im->size - lo ? im->size : lo + len;
    hi = im->size - hi > PFR_UW_IMAGE_TAIL ? hi + PFR_UW_IMAGE_TAIL : im->size;
    if (lo < im->win_lo)
        lo = im->win_lo;
    if (hi > im->win_hi)
        hi = im->win_hi;
    for (uint64_t pg = lo >> im->shift; lo < hi && pg <= (hi - 1) >> im->shift; pg++) {
        if (im->resident[pg - im->first_page])
            continue;
        int rc = load_page(im, pg);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pfr_uw_image_need_all(pfr_uw_image *im)
{
    if (!im || im->win_lo == im->win_hi)
        return 0;
    im->all = true;
    return pfr_uw_image_need(im, im->p + im->win_lo, im->win_hi - im->win_lo);
}

void pfr_uw_image_drop(pfr_uw_image *im)
{
    if (!im || im->all || im->held == 0)
        return;
    uint64_t pg = im->drop_lo / im->page, end = im->drop_hi / im->page;
    while (pg < end) {
        if (!im->resident[pg - im->first_page]) {
            pg++;
            continue;
        }
        uint64_t run = pg;
        while (run < end && im->resident[run - im->first_page]) {
            im->resident[run - im->first_page] = 0;
            run++;
        }
        /* a failure leaves the pages as they are: copied again, they read the same */
        madvise(im->p + pg * im->page, (run - pg) * im->page, MADV_DONTNEED);
        pg = run;
    }
    im->held = 0;
}

void pfr_uw_image_free(pfr_uw_image *im)
{
    if (im->p)
        munmap(im->p - PFR_UW_IMAGE_PREFIX, PFR_UW_IMAGE_PREFIX + im->size + PFR_UW_IMAGE_PAD);
    free(im->resident);
    free(im->sums);
    memset(im, 0, sizeof(*im));
}
