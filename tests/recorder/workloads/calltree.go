// The known call tree in Go: frames must carry Go's own names (main.heavy, main.light). As in
// calltree_lib.c, heavy and light split this thread's CPU time 3:1 by a schedule on its CPU clock
// (counted iterations do not cost the same in every build).
package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

const (
	chunk  = 200000  // iterations between two reads of the CPU clock (a system call)
	unitNs = 1000000 // a unit of CPU time is 1-3 ms, drawn at random each round
)

var sink uint64

// cpuNs reads this thread's CPU clock (main locks the goroutine to its thread).
//
//go:noinline
func cpuNs() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID,
		uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// burn spins until the CPU clock reads until. Go gives small leaf functions no frame pointer,
// and a sample in such a leaf loses its caller (the frame-pointer walk starts at the caller's
// caller); the call to cpuNs makes burn a non-leaf with a frame, so heavy and light show.
//
//go:noinline
func burn(until int64) {
	var x uint64
	for cpuNs() < until {
		for i := 0; i < chunk; i++ {
			x += uint64(i)
		}
	}
	sink += x
}

//go:noinline
func heavy(until int64) { burn(until) }

//go:noinline
func light(until int64) { burn(until) }

func main() {
	runtime.LockOSThread()
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	// The length of a round varies at random (heavy stays 3x light in every round): a fixed
	// round could beat against the fixed sampling period and bias the split.
	seed := uint64(time.Now().UnixNano())
	slot := cpuNs()
	for time.Now().Before(end) {
		seed = seed*6364136223846793005 + 1442695040888963407
		u := unitNs + int64(seed>>33)%(2*unitNs)
		slot += 3 * u
		heavy(slot)
		slot += u
		light(slot)
	}
}
