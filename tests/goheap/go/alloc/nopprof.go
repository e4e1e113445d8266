//go:build !withpprof

package main

func startPprof() {}
