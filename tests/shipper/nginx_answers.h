/* Answers of an nginx in front of a sink, for the test servers' faults. */
#ifndef PFR_TEST_NGINX_ANSWERS_H
#define PFR_TEST_NGINX_ANSWERS_H

/* What nginx answers a plain HTTP request on its TLS port (its error page, CRLF lines, with
 * server_tokens off). */
#define NGINX_TLS_400                                                                              \
    "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n"  \
    "<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n"                                      \
    "<center>The plain HTTP request was sent to HTTPS port</center>\r\n"                           \
    "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

#endif
