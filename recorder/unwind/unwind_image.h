/*
 * unwind_image: the unwind table builder's private image of an ELF file (internal to
 * pfr_unwind_table; not a public API).
 *
 * libelf and libdw run over an image in our memory, never over the file: libdw 0.188 reads the
 * first byte of a LEB128 operand before checking the end of the instructions, so a forged FDE
 * can make it read a byte past its section. In our image that byte is the file's next one or
 * the zeroed PFR_UW_IMAGE_PAD, and the result is the same from a descriptor and from memory.
 *
 * From a descriptor the image is sparse: anonymous memory of the file's size, where only the
 * headers and the sections the builder reads are copied (each with PFR_UW_IMAGE_TAIL bytes
 * after it; of .eh_frame_hdr, its first PFR_UW_HDR_COPY bytes). The .eh_frame section, the largest
 * by far (35 MB in ClickHouse's library), is a window: its pages are copied when the builder says
 * it needs them (pfr_uw_image_need()) and given back when it says it is done with them
 * (pfr_uw_image_drop()). A page read twice must read the same (a keyed hash of each page is kept):
 * the builder checks the instructions once, and libdw must run the bytes that were checked.
 *
 * Errors: 0 or a negative errno. Ownership: pfr_uw_image_load() fills a caller's struct whose
 * memory pfr_uw_image_free() gives back; the descriptor stays the caller's.
 */
#ifndef PFR_UNWIND_IMAGE_H
#define PFR_UNWIND_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what a file's headers may ask the builder and the image to read. */
#define PFR_UW_MAX_PHDRS 4096u
#define PFR_UW_MAX_SCNS  (1u << 16)
#define PFR_UW_MAX_NOTES 16u /* PT_NOTE segments looked into for Go's build id */

/* Bytes of .eh_frame_hdr copied: libdw reads its header only (the builder makes it ignore the
 * linker's search table, 5 MB in ClickHouse's library). */
#define PFR_UW_HDR_COPY 4096u

#define PFR_UW_IMAGE_PAD 4096u /* zeroed bytes after the image */
/* Zeroed bytes before the image, for the builder's own use (a small ELF file of its own, whose
 * .eh_frame is the image's: unwind_table.c). Page aligned. */
#define PFR_UW_IMAGE_PREFIX 4096u
#define PFR_UW_IMAGE_TAIL   16u /* bytes of the file copied after each section */

typedef struct pfr_uw_image {
    int fd;
    uint64_t size; /* of the file */
    uint8_t *p;    /* size + PFR_UW_IMAGE_PAD bytes, mmap'ed after PFR_UW_IMAGE_PREFIX bytes */
    /* the .eh_frame window; lo == hi when there is none (everything is copied) */
    uint64_t win_lo, win_hi;   /* file bytes copied on demand: the section and its tail */
    uint64_t drop_lo, drop_hi; /* whole pages that may be given back, page aligned */
    uint64_t page;             /* the page size, 1 << shift */
    unsigned shift;
    uint64_t first_page; /* win_lo's page: index 0 of the two arrays below */
    uint8_t *resident;   /* per page of the window: 1 copied */
    uint64_t *sums;      /* per page: hash of its bytes when first copied (0 not yet) */
    uint64_t key;        /* of those hashes, secret */
    size_t held;         /* droppable pages copied */
    bool all;            /* the whole window was asked for: nothing is dropped any more */
} pfr_uw_image;

/* Map the image of the regular file at fd, size bytes, and copy what the builder reads: at most
 * max_held bytes copied at once (all but the window), checked before each copy, and a window of
 * at most max_window bytes.
 * @return 0; -EFBIG more to copy than max_held, or a larger window; -ENOMEM the image cannot be
 * mapped; -EIO, or the errno of pread. */
int pfr_uw_image_load(pfr_uw_image *im, int fd, uint64_t size, uint64_t max_held,
                      uint64_t max_window);

/* Make [at, at + len) of the image (a pointer into it) hold the file's bytes, and the
 * PFR_UW_IMAGE_TAIL bytes after them. A no-op outside the window, or with im NULL.
 * @return 0; -ESTALE a page differs from when it was first read (the file changed); -EIO, or
 * the errno of pread. */
int pfr_uw_image_need(pfr_uw_image *im, const void *at, uint64_t len);

/* The whole window, copied now and kept (for libdw reading .eh_frame on its own). */
int pfr_uw_image_need_all(pfr_uw_image *im);

/* Give back the window's droppable pages; any pointer into them reads zeros until needed again.
 * Only when nothing (libdw's caches included) holds a pointer into them. */
void pfr_uw_image_drop(pfr_uw_image *im);

/* Droppable pages copied: when the builder should drop them. */
static inline size_t pfr_uw_image_held(const pfr_uw_image *im)
{
    return im ? im->held : 0;
}

void pfr_uw_image_free(pfr_uw_image *im);

#endif
