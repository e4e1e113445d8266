/* UNDER_ASAN: 1 in a build with AddressSanitizer, whose quarantine keeps freed blocks (libdw
 * frees a frame per row) and whose shadow grows with the rest, so that peak RSS says nothing
 * about what a build holds; the tests check it elsewhere. */
#ifndef PFR_UNDER_ASAN_H
#define PFR_UNDER_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#endif
