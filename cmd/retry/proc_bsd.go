//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"os"
	"syscall"
)

// canStop: Ctrl-Z stops retry here (the orphaned-group check reads Linux's
// /proc).
func canStop() bool { return true }

// setDeathSignal: no parent-death signal here.
func setDeathSignal(*syscall.SysProcAttr) {}

// notifyChildStops: stops are not watched here (see proc_linux.go).
func notifyChildStops() (<-chan os.Signal, func()) { return nil, func() {} }

func (p *process) stoppedBy() (syscall.Signal, bool) { return 0, false }

// No real-time signal names here (sigRTMin > sigRTMax).
const sigRTMin, sigRTMax = 1, 0

// signalAliases are the other names the signals have.
var signalAliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT}
