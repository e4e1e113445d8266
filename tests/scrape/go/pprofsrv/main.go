// pprofsrv: a Go server with net/http/pprof and known work, for pfr's scrape tests.
//
// Functions the tests look for in the scraped profiles:
//
//	main.burnCPU         CPU time (about half a core)
//	main.allocSite       heap allocations (64 KiB blocks, some retained)
//	main.blockSite       blocking on a channel receive (block profile)
//	main.mutexSite       mutex contention (mutex profile, at the Unlock of the holder)
//	main.parkedGoroutine 8 goroutines parked forever (goroutine profile)
//
// Flags: -addr for the pprof server (DefaultServeMux), -app-addr for a second listener whose
// mux has no pprof handlers, -work for the work it does besides the parked goroutines: all (the
// default), cpu (burnCPU only) or none (for a test that looks at its goroutines only, so that
// it takes no CPU beside other tests). It prints "pprof=HOST:PORT" (and "app=HOST:PORT") on
// stdout.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

var (
	retained [16][]byte
	counter  uint64
	mu       sync.Mutex
	shared   uint64
)

//go:noinline
func burnCPU() {
	for {
		deadline := time.Now().Add(5 * time.Millisecond)
		for time.Now().Before(deadline) {
			for i := 0; i < 1000; i++ {
				counter += uint64(i) * 7
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

//go:noinline
func allocSite(i int) {
	b := make([]byte, 64<<10)
	b[0] = byte(i)
	retained[i%len(retained)] = b
}

func allocLoop() {
	for i := 0; ; i++ {
		allocSite(i)
		time.Sleep(time.Millisecond)
	}
}

//go:noinline
func blockSite(ch chan int) int {
	return <-ch
}

func blockLoop() {
	ch := make(chan int)
	go func() {
		for i := 0; ; i++ {
			time.Sleep(time.Millisecond)
			ch <- i
		}
	}()
	for {
		blockSite(ch)
	}
}

//go:noinline
func mutexSite() {
	mu.Lock()
	shared++
	time.Sleep(200 * time.Microsecond)
	mu.Unlock()
}

func mutexLoop() {
	for {
		mutexSite()
	}
}

//go:noinline
func parkedGoroutine(ch chan struct{}) {
	<-ch
}

func main() {
	runtime.MemProfileRate = 64 << 10
	addr := flag.String("addr", "127.0.0.1:0", "pprof listen address")
	appAddr := flag.String("app-addr", "", "second listener without pprof")
	work := flag.String("work", "all", "work besides the parked goroutines: all, cpu or none")
	flag.Parse()
	if *work != "all" && *work != "cpu" && *work != "none" {
		fmt.Fprintf(os.Stderr, "-work %q: all, cpu or none\n", *work)
		os.Exit(2)
	}
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *appAddr != "" {
		al, err := net.Listen("tcp", *appAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		app := http.NewServeMux()
		app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			http.NotFound(w, r)
		})
		go http.Serve(al, app)
		fmt.Printf("app=%s\n", al.Addr())
	}
	never := make(chan struct{})
	for i := 0; i < 8; i++ {
		go parkedGoroutine(never)
	}
	if *work != "none" {
		go burnCPU()
	}
	if *work == "all" {
		go allocLoop()
		go blockLoop()
		for i := 0; i < 4; i++ {
			go mutexLoop()
		}
	}
	fmt.Printf("pprof=%s\n", l.Addr())
	os.Stdout.Sync()
	http.Serve(l, nil)
}
