// Go process for the symbolizer tests: Go names must come back as Go writes them.
package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
)

type T struct{ n int }

//go:noinline
func hotFunction(x int) int { return x*3 + 1 } // GO_LINE

//go:noinline
func (t *T) Method(x int) int { return t.n + x }

func main() {
	fmt.Printf("hotFunction 0x%x\n", reflect.ValueOf(hotFunction).Pointer())
	fmt.Printf("method 0x%x\n", reflect.ValueOf((*T).Method).Pointer())
	fmt.Printf("ready\n")
	io.Copy(io.Discard, os.Stdin)
	if hotFunction(1)+(&T{1}).Method(1) != 6 {
		os.Exit(1)
	}
}
