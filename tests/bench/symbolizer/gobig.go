// A larger Go program for the symbolizer benchmark: the net/http, TLS and JSON packages make a
// binary of several MB with a symbol table and DWARF of a realistic service's size.
package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	_ = &http.Server{TLSConfig: &tls.Config{}}
	b, _ := json.Marshal(map[string]int{"a": 1})
	fmt.Printf("json %d\nready\n", len(b))
	io.Copy(io.Discard, os.Stdin)
}
