// plainsrv: a Go HTTP server without net/http/pprof, for pfr's local discovery tests. It counts
// the requests it gets (GET /count answers the count, not counting itself) so a test can check
// that discovery never sent it anything. Prints "addr=HOST:PORT" on stdout.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	var requests int64
	mux := http.NewServeMux()
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", atomic.LoadInt64(&requests))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&requests, 1)
		http.NotFound(w, r)
	})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("addr=%s\n", l.Addr())
	os.Stdout.Sync()
	http.Serve(l, mux)
}
