// alloc: allocates from known functions at known amounts, one phase per command read on stdin,
// so a test can read its heap profile from outside between phases. Commands:
//
//	phase      run one allocation phase, collect garbage, print "done N"
//	trickle    allocate in the background at a modest steady rate (benchmarks), print "trickling"
//	exec PATH  replace this process with PATH (for the exec-during-read test)
//	exit       exit
//
// Built twice: with -tags withpprof it serves net/http/pprof (and prints "port N"); without
// it, nothing references runtime.MemProfile and the linker leaves MemProfileRate at 0.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Per phase: allocSmall 2,000,000 x 64 B, allocMedium 200,000 x 1 KiB, allocLarge 2,000 x 64 KiB,
// allocInline (inlined into viaWrapper) 1,000,000 x 256 B: each function gets about 250 samples or
// more, so its estimated total is within a few percent. The last keep* objects of each stay
// reachable (in use).
const (
	nSmall, sizeSmall, keepSmall    = 2000000, 64, 20000
	nMedium, sizeMedium, keepMedium = 200000, 1024, 1000
	nLarge, sizeLarge, keepLarge    = 2000, 65536, 40
	nInline, sizeInline, keepInline = 1000000, 256, 500
)

var (
	small  [keepSmall][]byte
	medium [keepMedium][]byte
	large  [keepLarge][]byte
	inl    [keepInline][]byte
)

//go:noinline
func allocSmall(i int) { small[i%keepSmall] = make([]byte, sizeSmall) }

//go:noinline
func allocMedium(i int) { medium[i%keepMedium] = make([]byte, sizeMedium) }

//go:noinline
func allocLarge(i int) { large[i%keepLarge] = make([]byte, sizeLarge) }

// allocInline is small enough to be inlined: the runtime then records a PC for it and one for
// viaWrapper's inline mark, which a reader must not expand twice.
func allocInline(i int) { inl[i%keepInline] = make([]byte, sizeInline) }

//go:noinline
func viaWrapper(i int) { allocInline(i) }

func phase() {
	for i := 0; i < nSmall; i++ {
		allocSmall(i)
		if i%(nSmall/nMedium) == 0 {
			allocMedium(i / (nSmall / nMedium))
		}
		if i%(nSmall/nLarge) == 0 {
			allocLarge(i / (nSmall / nLarge))
		}
		if i%(nSmall/nInline) == 0 {
			viaWrapper(i / (nSmall / nInline))
		}
	}
	// Three cycles publish every allocation and free of the phase in the profile.
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
}

// trickle: per 10 ms, 200 small, 1 medium and every 10th time 1 large object.
func trickle() {
	for i := 0; ; i++ {
		for k := 0; k < 200; k++ {
			allocSmall(i*200 + k)
		}
		allocMedium(i)
		if i%10 == 0 {
			allocLarge(i / 10)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func main() {
	startPprof()
	in := bufio.NewScanner(os.Stdin)
	n := 0
	fmt.Println("ready")
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "phase":
			phase()
			n++
			fmt.Println("done", n)
		case "trickle":
			go trickle()
			fmt.Println("trickling")
		case "exec":
			err := syscall.Exec(f[1], f[1:], os.Environ())
			fmt.Println("exec failed:", err)
		case "exit":
			return
		}
	}
}
