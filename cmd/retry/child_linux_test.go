package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// testChild runs the test binary as a child command of retry (see TestMain):
// mode "signals" reports "ready PID PGID", then one "sig NAME" line per
// SIGINT, SIGTERM, SIGHUP or SIGQUIT received, and exits 3 on a signal named in
// $EXIT_ON (it ignores the others).
func testChild(mode string) int {
	if mode != "signals" {
		fmt.Fprintf(os.Stderr, "unknown test child mode %q\n", mode)
		return 2
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	fmt.Printf("ready %d %d\n", os.Getpid(), syscall.Getpgrp())
	names := map[os.Signal]string{syscall.SIGINT: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP", syscall.SIGQUIT: "QUIT"}
	for s := range c {
		fmt.Printf("sig %s\n", names[s])
		if strings.Contains(os.Getenv("EXIT_ON"), names[s]) {
			return 3
		}
	}
	return 0
}
