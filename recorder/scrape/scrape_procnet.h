/*
 * scrape_procnet: which TCP ports a process listens on, from /proc/PID/net/tcp{,6} (the sockets
 * of its network namespace) matched with the socket inodes of /proc/PID/fd.
 */
#ifndef PFR_SCRAPE_PROCNET_H
#define PFR_SCRAPE_PROCNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sc_listen {
    uint64_t inode;
    bool v6;
    uint8_t addr[16]; /* network byte order; the first 4 bytes for IPv4 */
    unsigned port;
};

/* One line of /proc/net/tcp (v6 false) or tcp6: 1 and *out for a LISTEN socket, 0 for any other
 * line (the header, another state), -EBADMSG for a malformed line. */
int pfr_scrape_procnet_parse_line(const char *line, bool v6, struct sc_listen *out);

/* Every LISTEN socket of a whole file's text, appended to *v (malloc'ed, grown as needed) up to
 * max entries in all. Malformed lines are skipped and counted in *bad (may be NULL). */
int pfr_scrape_procnet_parse(const char *text, bool v6, struct sc_listen **v, size_t *n, size_t max,
                             size_t *bad);

/* The host to connect to for a listening address: a wildcard becomes the loopback address of its
 * family ("127.0.0.1", "[::1]"), an IPv4-mapped IPv6 address its IPv4 form, other IPv6 addresses
 * are bracketed. false for an address that cannot be used alone (IPv6 link-local). */
bool pfr_scrape_listen_host(const struct sc_listen *l, char *buf, size_t len);

/* The socket inodes among /proc/PID/fd (sorted, at most max) into *out (malloc'ed). */
int pfr_scrape_proc_socket_inodes(const char *proc_root, pid_t pid, uint64_t **out, size_t *n,
                                  size_t max);

#endif
