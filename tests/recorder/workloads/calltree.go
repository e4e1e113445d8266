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
func heavy() { burn(3 * unit) }

//go:noinline
func light() { burn(unit) }

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		heavy()
		light()
	}
}
