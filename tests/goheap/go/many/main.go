// many: a process with many memory-profile buckets. Every allocation is recorded
// (MemProfileRate = 1) and each of N allocations comes through a different call path, so the
// runtime keeps about N buckets. With "churn" it then keeps creating new paths and allocating
// heavily, so the bucket list grows while it is being read. Prints "ready" when the N exist.
// Built with -tags withpprof it also serves net/http/pprof (and first prints "port N").
//
//	many N [churn]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

var sink []byte

func init() { runtime.MemProfileRate = 1 }

// rec reaches depth 0 through one of ten call sites per level: 10^d distinct stacks.
//
//go:noinline
func rec(d, n int) {
	if d == 0 {
		sink = make([]byte, 16)
		return
	}
	switch n % 10 {
	case 0:
		rec(d-1, n/10)
	case 1:
		rec(d-1, n/10)
	case 2:
		rec(d-1, n/10)
	case 3:
		rec(d-1, n/10)
	case 4:
		rec(d-1, n/10)
	case 5:
		rec(d-1, n/10)
	case 6:
		rec(d-1, n/10)
	case 7:
		rec(d-1, n/10)
	case 8:
		rec(d-1, n/10)
	default:
		rec(d-1, n/10)
	}
}

func main() {
	startPprof()
	n, _ := strconv.Atoi(os.Args[1])
	depth := 1
	for p := 10; p < n; p *= 10 {
		depth++
	}
	for i := 0; i < n; i++ {
		rec(depth, i)
	}
	runtime.GC()
	runtime.GC()
	runtime.GC()
	fmt.Println("ready")
	if len(os.Args) > 2 && os.Args[2] == "churn" {
		// new stacks (deeper paths) and plenty of garbage, forever
		for i := 0; ; i++ {
			rec(depth+1+i%3, i)
			for k := 0; k < 64; k++ {
				sink = make([]byte, 128)
			}
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}
