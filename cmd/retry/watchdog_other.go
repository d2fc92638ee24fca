//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// watchdog: none here (no process groups): if retry is killed, the command
// runs on.
type watchdog struct{}

func startWatchdog() *watchdog { return nil }
func (*watchdog) watch(int)    {}
func (*watchdog) forget()      {}
func (*watchdog) close()       {}
func isWatchdog() bool         { return false }
func watchdogMain() int        { return 0 }
