// The known call tree in Go: frames must carry Go's own names (main.heavy, main.light).
package main

import (
	"os"
	"strconv"
	"time"
)

const unit = 100000

var sink uint64

// Go gives small leaf functions no frame pointer, and a sample in such a leaf loses its caller
// (the frame-pointer walk starts at the caller's caller). The call to mark() makes burn a
// non-leaf with a frame, so heavy and light show.
//
//go:noinline
func mark() { sink++ }

//go:noinline
func burn(n int) {
	mark()
	var x uint64
	for i := 0; i < n; i++ {
		x += uint64(i)
	}
	sink += x
}

//go:noinline
func heavy(u int) { burn(3 * u) }

//go:noinline
func light(u int) { burn(u) }

func main() {
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
	for time.Now().Before(end) {
		seed = seed*6364136223846793005 + 1442695040888963407
		u := unit/2 + int(seed>>33)%unit
		heavy(u)
		light(u)
	}
}
