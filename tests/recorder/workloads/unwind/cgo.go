// Native code called from Go: a ground-truth program of tests/recorder/unwind_itest.py.
//
//	main.main -> main.goCaller -> (cgo: main._Cfunc_c_caller, runtime.cgocall, runtime.asmcgocall,
//	             the C wrapper _cgo_..._Cfunc_c_caller) -> c_caller -> c_leaf
//
// The Go code keeps its frame pointers; the C code has none (-fomit-frame-pointer), c_caller moves
// rsp (a volatile local array) and c_leaf, where nearly all the time goes, has no frame at all. So
// a frame-pointer walk from c_leaf skips c_caller (and the cgo wrapper); a walk with the C code's
// .eh_frame gets back to asmcgocall, from where Go's frame pointers lead to main.main, across the
// switch from the thread's system stack to the goroutine's stack.
//
// Usage: pfr-uw-cgo SECONDS; prints "truth c_caller=N" (leaf iterations) at exit.
// Built by tests/recorder/CMakeLists.txt with GO111MODULE=off CGO_ENABLED=1 (go build cgo.go).
package main

/*
#cgo CFLAGS: -O2 -g -fomit-frame-pointer

volatile unsigned long c_sink;

// The hot leaf: n dependent multiply-adds in registers, no call, no stack: no frame.
// noinline/noclone keep it a frame of its own under its own name; the empty asm keeps the loop.
static __attribute__((noinline, noclone)) unsigned long c_leaf(unsigned long n)
{
	unsigned long x = n;
	for (unsigned long i = 0; i < n; i++) {
		x = x * 6364136223846793005ul + 1442695040888963407ul;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

// The caller: a volatile local array makes it adjust rsp (a frame in its CFA rule, no frame
// pointer), and the use of the array after the call keeps the call from being a tail call.
__attribute__((noinline, noclone)) unsigned long c_caller(unsigned long n)
{
	volatile unsigned long pad[8];
	pad[0] = n;
	pad[7] = c_leaf(pad[0]);
	c_sink += pad[7];
	return pad[7] ^ pad[0];
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink uint64

// goCaller stays a Go frame of its own between main.main and the cgo call.
//
//go:noinline
func goCaller(n uint64) uint64 {
	return uint64(C.c_caller(C.ulong(n)))
}

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	// ~2M leaf iterations a call (a few ms), the length drawn in [1M, 3M): no beat against the
	// profilers' fixed sampling period.
	const unit = 2000000
	seed := uint64(time.Now().UnixNano())
	var work uint64
	for time.Now().Before(end) {
		seed = seed*6364136223846793005 + 1442695040888963407
		n := unit/2 + (seed>>33)%unit
		sink += goCaller(n)
		work += n
	}
	fmt.Printf("truth c_caller=%d\n", work)
}
