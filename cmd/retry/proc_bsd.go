//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import "syscall"

// No real-time signal names here (sigRTMin > sigRTMax).
const sigRTMin, sigRTMax = 1, 0

// signalAliases are the other names the signals have.
var signalAliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT}
