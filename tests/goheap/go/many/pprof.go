//go:build withpprof

package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
)

// startPprof serves net/http/pprof so a benchmark can time the runtime's own heap profile.
func startPprof() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println("port", l.Addr().(*net.TCPAddr).Port)
	go http.Serve(l, nil)
}
