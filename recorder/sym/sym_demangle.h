/*
 * sym_demangle: C++ (Itanium ABI) and Rust names to readable text, through libiberty's
 * cplus_demangle (Debian's libiberty-dev). Go and C names are not mangled and come back NULL, so
 * the caller keeps them as written ("main.foo", "net/http.(*conn).serve").
 */
#ifndef PFR_SYM_DEMANGLE_H
#define PFR_SYM_DEMANGLE_H

/* A malloc'd demangled copy of name (caller frees), or NULL when name is not mangled or does not
 * demangle. */
char *pfr_sym_demangle(const char *name);

#endif
